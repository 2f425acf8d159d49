package wechatmsg

import (
	"strings"
	"unicode"
)

// FitValue cuts or filters value so WeChat accepts it for the template key key, whose type is its
// prefix before the trailing number ("thing1" is a thing). WeChat rejects a whole message (47003)
// when one value breaks its type's rules, and a message shortened by a few characters serves the
// user better than none. The rules follow WeChat's table for subscribeMessage.send
// (订阅消息参数值内容限制说明); lengths count characters (runes), not bytes:
//
//	thing             20 characters of any kind
//	name              10 characters, or 20 when all are ASCII letters or symbols
//	phrase            5 Chinese characters; other characters are dropped
//	character_string  32 ASCII letters, digits or symbols; other characters are dropped
//	number            32 digits with at most one decimal point; other characters are dropped
//	letter            32 ASCII letters; other characters are dropped
//	symbol            5 symbols or punctuation; other characters are dropped
//	phone_number      17 digits or symbols; other characters are dropped
//	car_number        8 ASCII letters or digits, a Chinese character allowed only first and
//	                  last; other characters are dropped
//
// time, date, amount and enum values, and keys of unknown type, are returned unchanged: cutting a
// date or a sum of money would change its meaning, so those must be formatted right by the caller.
// The text types have surrounding spaces trimmed and control characters turned into spaces.
// A result may be empty (nothing fit); Send refuses empty values.
func FitValue(key, value string) string {
	switch kind(key) {
	case "thing":
		return cut(text(value), 20)
	case "name":
		v := text(value)
		if isASCII(v) {
			return cut(v, 20)
		}
		return cut(v, 10)
	case "phrase":
		return cut(keep(value, isHan), 5)
	case "character_string":
		return cut(keep(value, isASCIIGraphic), 32)
	case "number":
		return fitNumber(value)
	case "letter":
		return cut(keep(value, isASCIILetter), 32)
	case "symbol":
		return cut(keep(value, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) }), 5)
	case "phone_number":
		return cut(keep(value, func(r rune) bool { return isASCIIGraphic(r) && !isASCIILetter(r) }), 17)
	case "car_number":
		return fitCarNumber(value)
	default:
		return value
	}
}

// kind is the type prefix of a template key: "character_string3" → "character_string".
func kind(key string) string {
	return strings.TrimRightFunc(key, func(r rune) bool { return r >= '0' && r <= '9' })
}

// text trims a free-text value; a newline or tab would show as nothing or as a box in the message.
func text(v string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, v))
}

// cut keeps the first n runes of v.
func cut(v string, n int) string {
	i := 0
	for pos := range v {
		if i == n {
			return v[:pos]
		}
		i++
	}
	return v
}

// keep drops the runes of v for which ok is false.
func keep(v string, ok func(rune) bool) string {
	return strings.Map(func(r rune) rune {
		if ok(r) {
			return r
		}
		return -1
	}, v)
}

func isHan(r rune) bool          { return unicode.Is(unicode.Han, r) }
func isASCIIGraphic(r rune) bool { return r > ' ' && r < 0x7f }
func isASCIILetter(r rune) bool  { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
func isASCIIDigit(r rune) bool   { return r >= '0' && r <= '9' }

func isASCII(v string) bool {
	for _, r := range v {
		if r >= 0x80 {
			return false
		}
	}
	return true
}

// fitNumber keeps digits and the first decimal point, then cuts to 32 characters without leaving
// a bare point at either end.
func fitNumber(v string) string {
	seenPoint := false
	v = keep(v, func(r rune) bool {
		if r == '.' && !seenPoint {
			seenPoint = true
			return true
		}
		return isASCIIDigit(r)
	})
	if strings.HasPrefix(v, ".") {
		v = "0" + v
	}
	return strings.TrimSuffix(cut(v, 32), ".")
}

// fitCarNumber keeps letters, digits and Chinese characters, drops Chinese characters other than
// the first and last (粤A8Z888挂 is a plate; 粤A京8 is not), then cuts to 8. Cutting last keeps the
// rule: a prefix can only lose the final Chinese character, never move one inside.
func fitCarNumber(v string) string {
	rs := []rune(keep(v, func(r rune) bool {
		return isASCIILetter(r) || isASCIIDigit(r) || isHan(r)
	}))
	out := rs[:0]
	for i, r := range rs {
		if isHan(r) && i != 0 && i != len(rs)-1 {
			continue
		}
		out = append(out, r)
	}
	return cut(string(out), 8)
}

// KnownKey reports whether key is a template key of a type WeChat defines: the type, then its number
// (thing1, time2, character_string3).
func KnownKey(key string) bool {
	k := kind(key)
	if k == key {
		return false // no number
	}
	switch k {
	case "thing", "name", "phrase", "character_string", "number", "letter", "symbol", "phone_number", "car_number",
		"time", "date", "amount", "enum":
		return true
	}
	return false
}
