package wechatmsg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/notify/wechatmsg"
)

var fitCases = []struct{ key, in, want string }{
	// thing: 20 characters, counted in runes.
	{"thing1", "瑜伽小班课", "瑜伽小班课"},
	{"thing1", strings.Repeat("预", 25), strings.Repeat("预", 20)},
	{"thing1", strings.Repeat("a", 25), strings.Repeat("a", 20)},
	{"thing12", "  朝阳店\n3号教室  ", "朝阳店 3号教室"},
	{"thing1", "🚀" + strings.Repeat("x", 20), "🚀" + strings.Repeat("x", 19)},
	// name: 10 characters, 20 when all ASCII.
	{"name6", "欧阳娜娜娜娜娜娜娜娜娜", "欧阳娜娜娜娜娜娜娜娜"},
	{"name6", "Alexandria Ocasio-Cortez", "Alexandria Ocasio-Co"},
	{"name6", "Li 小龙 Bruce Lee", "Li 小龙 Bruc"},
	// phrase: 5 Chinese characters only.
	{"phrase5", "已确认", "已确认"},
	{"phrase5", "预约成功了哦呢", "预约成功了"},
	{"phrase5", "OK已取消!", "已取消"},
	// character_string: 32 ASCII letters, digits, symbols.
	{"character_string3", "BK-2025/06#42", "BK-2025/06#42"},
	{"character_string3", "订单 BK 42", "BK42"},
	{"character_string3", strings.Repeat("9", 40), strings.Repeat("9", 32)},
	// number: digits with one decimal point.
	{"number4", "12.50", "12.50"},
	{"number4", "1,234.5.6 人", "1234.56"},
	{"number4", ".5", "0.5"},
	{"number4", strings.Repeat("1", 31) + ".5", strings.Repeat("1", 31)},
	// letter, symbol.
	{"letter11", "abc-DEF 123", "abcDEF"},
	{"symbol12", "→ ★ ok ! ?", "→★!?"},
	{"symbol12", "!!!!!!!!", "!!!!!"},
	// phone_number: 17 digits or symbols.
	{"phone_number9", "+86-0766-66888866", "+86-0766-66888866"},
	{"phone_number9", "电话 138 0013 8000", "13800138000"},
	{"phone_number9", "+86 (0)10 1234 5678 ext 9", "+86(0)10123456789"},
	// car_number: 8, Chinese only first and last.
	{"car_number10", "粤A·8Z888挂", "粤A8Z888挂"},
	{"car_number10", "粤A京B12345", "粤AB12345"},
	// kept as given.
	{"time2", "2025年6月1日 10:00~11:00", "2025年6月1日 10:00~11:00"},
	{"date8", " 2025-06-01 ", " 2025-06-01 "},
	{"amount7", "¥128.00元", "¥128.00元"},
	{"enum13", "A", "A"},
	{"custom", "whatever it is", "whatever it is"},
}

func TestFitValue(t *testing.T) {
	t.Parallel()
	for _, tc := range fitCases {
		require.Equal(t, tc.want, wechatmsg.FitValue(tc.key, tc.in), "%s %q", tc.key, tc.in)
		// Fitting is idempotent, so Send may fit values callers already fitted.
		require.Equal(t, tc.want, wechatmsg.FitValue(tc.key, tc.want), "%s %q twice", tc.key, tc.in)
	}
}

// TestFitValueAcceptedByFake sends every fitted value to the fake, which checks WeChat's limits
// with its own code: FitValue and the fake must agree.
func TestFitValueAcceptedByFake(t *testing.T) {
	t.Parallel()
	fake, c, _ := setup(t)
	for _, tc := range fitCases {
		err := c.Send(context.Background(), wechatmsg.Message{
			ToUser: "u", TemplateID: "t", Data: map[string]string{tc.key: tc.in},
		})
		require.NoError(t, err, "%s %q", tc.key, tc.in)
	}
	require.Equal(t, fake.Sends(), len(fake.Messages()))
}
