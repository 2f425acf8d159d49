export default definePageConfig({ navigationBarTitleText: "前台核销" });
