package faultproxy

// This file reads just enough of the MySQL client/server protocol, in the client→server direction,
// to tell where each packet ends and whether a command is a COMMIT. A packet is a 3-byte
// little-endian payload length, a 1-byte sequence id and the payload; a payload of exactly
// maxPayload bytes means the command goes on in the next packet. Every command starts a new
// sequence at id 0, so a packet with id 0 that does not continue a longer one is a command; the
// packets of the handshake and authentication exchange, and LOAD DATA's file contents, carry
// higher ids.

// Capability flags of the client's handshake response that change how the stream must be read.
const (
	capCompress        = 0x00000020 // packets are wrapped in compressed frames
	capProtocol41      = 0x00000200 // the flags field is 4 bytes, not 2
	capSSL             = 0x00000800 // TLS follows this packet: the rest cannot be read
	capQueryAttributes = 1 << 27    // COM_QUERY carries a parameter count before its text
)

const (
	comQuery   = 0x03
	maxPayload = 0xffffff
	// maxInspect bounds how much of one command is kept to be matched: a COMMIT is a few bytes,
	// and a command longer than this is taken not to be one.
	maxInspect = 64 << 10
)

// commitScanner follows the client→server half of one MySQL connection and finds the packets that
// end a COM_QUERY whose text is COMMIT. Its zero value is ready for a new connection.
type commitScanner struct {
	hdr    [4]byte
	hdrN   int  // header bytes of the current packet seen so far
	left   int  // payload bytes of the current packet still to come
	length int  // payload length of the current packet
	cont   bool // the current packet continues the command of the one before

	handshakeDone bool // the first packet, the handshake response (or TLS request), is behind
	passthrough   bool // TLS or compression: stop reading, forward as is
	queryAttrs    bool

	collecting bool   // the current command may still be a COMMIT: its payload is being kept
	payload    []byte // of the current command (or of the handshake response: its flags)
}

// feed consumes p, the next bytes of the stream. When p holds the last byte of a COMMIT command it
// returns the length of p up to and including that byte, and true; the caller feeds the rest
// again. Otherwise it returns len(p), false.
func (s *commitScanner) feed(p []byte) (int, bool) {
	i := 0
	for i < len(p) && !s.passthrough {
		if s.hdrN < 4 {
			n := copy(s.hdr[s.hdrN:], p[i:])
			s.hdrN += n
			i += n
			if s.hdrN < 4 {
				break
			}
			s.startPacket()
		} else {
			n := min(s.left, len(p)-i)
			s.take(p[i : i+n])
			s.left -= n
			i += n
		}
		if s.hdrN == 4 && s.left == 0 {
			s.hdrN = 0
			if s.endPacket() {
				return i, true
			}
		}
	}
	return len(p), false
}

func (s *commitScanner) startPacket() {
	s.length = int(s.hdr[0]) | int(s.hdr[1])<<8 | int(s.hdr[2])<<16
	s.left = s.length
	seq := s.hdr[3]
	switch {
	case !s.handshakeDone:
		s.payload = s.payload[:0]
	case s.cont:
		// The command goes on; whether it is still being kept was decided by its first packet.
	case seq == 0:
		s.collecting = true
		s.payload = s.payload[:0]
	default:
		s.collecting = false
	}
}

func (s *commitScanner) take(b []byte) {
	if !s.handshakeDone {
		if n := 4 - len(s.payload); n > 0 {
			s.payload = append(s.payload, b[:min(n, len(b))]...)
		}
		return
	}
	if !s.collecting {
		return
	}
	if len(s.payload)+len(b) > maxInspect {
		s.collecting = false
		s.payload = s.payload[:0]
		return
	}
	s.payload = append(s.payload, b...)
	if s.payload[0] != comQuery {
		s.collecting = false
	}
}

// endPacket is called once a packet is complete; it reports whether it ended a COMMIT.
func (s *commitScanner) endPacket() bool {
	if !s.handshakeDone {
		s.handshakeDone = true
		s.readFlags()
		s.payload = s.payload[:0]
		return false
	}
	s.cont = s.length == maxPayload
	if !s.collecting || s.cont {
		return false
	}
	s.collecting = false
	return isCommitCommand(s.payload, s.queryAttrs)
}

// readFlags reads the capability flags at the start of the handshake response.
func (s *commitScanner) readFlags() {
	var flags uint32
	switch {
	case len(s.payload) >= 4:
		flags = uint32(s.payload[0]) | uint32(s.payload[1])<<8 | uint32(s.payload[2])<<16 | uint32(s.payload[3])<<24
		if flags&capProtocol41 == 0 {
			flags &= 0xffff
		}
	case len(s.payload) >= 2:
		flags = uint32(s.payload[0]) | uint32(s.payload[1])<<8
	}
	s.passthrough = flags&(capSSL|capCompress) != 0
	s.queryAttrs = flags&capProtocol41 != 0 && flags&capQueryAttributes != 0
}

// isCommitCommand reports whether payload, a whole command, is a COM_QUERY of a COMMIT.
func isCommitCommand(payload []byte, queryAttrs bool) bool {
	if len(payload) == 0 || payload[0] != comQuery {
		return false
	}
	q := payload[1:]
	if queryAttrs {
		// parameter_count and parameter_set_count; a COMMIT has no parameters.
		n, rest, ok := lenEnc(q)
		if !ok || n != 0 {
			return false
		}
		if _, rest, ok = lenEnc(rest); !ok {
			return false
		}
		q = rest
	}
	return isCommit(q)
}

// lenEnc reads a length-encoded integer.
func lenEnc(b []byte) (uint64, []byte, bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	var size int
	switch b[0] {
	case 0xfc:
		size = 2
	case 0xfd:
		size = 3
	case 0xfe:
		size = 8
	case 0xfb, 0xff:
		return 0, nil, false
	default:
		return uint64(b[0]), b[1:], true
	}
	if len(b) < 1+size {
		return 0, nil, false
	}
	var v uint64
	for i := size; i >= 1; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, b[1+size:], true
}

// isCommit reports whether the statement q is COMMIT [WORK] [;], in any case, with any whitespace
// and comments around the words. COMMIT AND CHAIN, RELEASE or a COMMIT followed by another
// statement are not matched: they are not what a driver sends to end a transaction.
func isCommit(q []byte) bool {
	rest, ok := skipSpace(q)
	if !ok || !hasWord(rest, "commit") {
		return false
	}
	if rest, ok = skipSpace(rest[len("commit"):]); !ok {
		return false
	}
	if hasWord(rest, "work") {
		if rest, ok = skipSpace(rest[len("work"):]); !ok {
			return false
		}
	}
	if len(rest) > 0 && rest[0] == ';' {
		if rest, ok = skipSpace(rest[1:]); !ok {
			return false
		}
	}
	return len(rest) == 0
}

// hasWord reports whether b starts with the word w (lower case), in any case, as a whole word.
func hasWord(b []byte, w string) bool {
	if len(b) < len(w) {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return len(b) == len(w) || !isWordByte(b[len(w)])
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// skipSpace skips whitespace and comments: /* ... */, "-- " to the end of the line and # to the end
// of the line. The executable comments /*! ... */ and /*M! ... */ hold statement text and are not
// skipped. It reports false for a comment that is not closed.
func skipSpace(b []byte) ([]byte, bool) {
	for len(b) > 0 {
		switch c := b[0]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			b = b[1:]
		case c == '#' || c == '-' && len(b) >= 3 && b[1] == '-' && (b[2] <= ' '):
			for len(b) > 0 && b[0] != '\n' {
				b = b[1:]
			}
		case c == '/' && len(b) >= 2 && b[1] == '*':
			if len(b) >= 3 && (b[2] == '!' || b[2] == 'M' && len(b) >= 4 && b[3] == '!') {
				return b, true
			}
			end := indexStarSlash(b[2:])
			if end < 0 {
				return nil, false
			}
			b = b[2+end+2:]
		default:
			return b, true
		}
	}
	return b, true
}

func indexStarSlash(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '*' && b[i+1] == '/' {
			return i
		}
	}
	return -1
}
