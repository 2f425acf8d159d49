export default definePageConfig({ navigationBarTitleText: "选择时段" });
