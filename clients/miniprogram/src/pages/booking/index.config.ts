export default definePageConfig({ navigationBarTitleText: "预约详情" });
