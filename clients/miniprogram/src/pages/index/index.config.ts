export default definePageConfig({ navigationBarTitleText: "场馆预约" });
