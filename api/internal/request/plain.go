package request

// A reader of the plain JSON objects that the hot paths receive most — a hold's body, our own
// tokens' claims — at a fraction of encoding/json's cost. It reads only what it is sure of and says
// false otherwise: the caller then hands the input to encoding/json, which decides, so that what is
// accepted and how a refusal reads never depend on which of the two read it.

// PlainObject walks raw when it is one JSON object whose keys are plain strings, calling field with
// each key and the offset of its value; field answers where the value ends, or false when it does
// not read it. False when raw is anything else.
func PlainObject(raw []byte, field func(key string, i int) (end int, ok bool)) bool {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return skipSpace(raw, i+1) == len(raw)
	}
	for {
		key, j, ok := PlainString(raw, i)
		if !ok {
			return false
		}
		i = skipSpace(raw, j)
		if i == len(raw) || raw[i] != ':' {
			return false
		}
		if i, ok = field(key, skipSpace(raw, i+1)); !ok {
			return false
		}
		i = skipSpace(raw, i)
		if i == len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return skipSpace(raw, i+1) == len(raw)
		default:
			return false
		}
	}
}

// PlainOnce reads the plain string at i with parse into *v and points *dst at it, the first time
// only (a repeated field is encoding/json's to decide), and answers where the string ends.
func PlainOnce[T any](raw []byte, i int, dst **T, v *T, parse func(string) (T, bool)) (int, bool) {
	s, j, ok := PlainString(raw, i)
	if !ok || *dst != nil {
		return 0, false
	}
	if *v, ok = parse(s); !ok {
		return 0, false
	}
	*dst = v
	return j, true
}

// PlainUint reads the JSON number at i when it is a whole number of 1 to maxDigits digits without a
// leading zero, fraction or exponent, and answers where it ends. (n overflows past 19 digits; a
// caller that allows more reads the digits itself.)
func PlainUint(raw []byte, i, maxDigits int) (n uint64, end int, ok bool) {
	j := i
	for j < len(raw) && j-i <= maxDigits && raw[j] >= '0' && raw[j] <= '9' {
		n = n*10 + uint64(raw[j]-'0')
		j++
	}
	if j == i || j-i > maxDigits || (raw[i] == '0' && j-i > 1) || (j < len(raw) && (raw[j] == '.' || raw[j] == 'e' || raw[j] == 'E')) {
		return 0, 0, false
	}
	return n, j, true
}

// skipSpace skips JSON whitespace from i on.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// PlainString reads the JSON string at i when it is printable ASCII without escapes, and answers
// where it ends.
func PlainString(raw []byte, i int) (string, int, bool) {
	if i == len(raw) || raw[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			return string(raw[i+1 : j]), j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", 0, false
		}
	}
	return "", 0, false
}
