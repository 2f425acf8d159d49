export default defineAppConfig({
  pages: [
    "pages/index/index",
    "pages/resource/index",
    "pages/bookings/index",
    "pages/booking/index",
    "pages/login/index",
    "pages/desk/index",
  ],
  window: {
    backgroundTextStyle: "light",
    navigationBarBackgroundColor: "#0f766e",
    navigationBarTitleText: "slotwheel 预约",
    navigationBarTextStyle: "white",
  },
});
