package faultproxy

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func packet(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

// handshakeResponse is the client's first packet with the given capability flags; the rest of a
// real response (user, auth data) does not matter to the scanner.
func handshakeResponse(flags uint32) []byte {
	payload := []byte{byte(flags), byte(flags >> 8), byte(flags >> 16), byte(flags >> 24)}
	payload = append(payload, make([]byte, 28)...)
	payload = append(payload, "root\x00\x14"...)
	payload = append(payload, bytes.Repeat([]byte{0xaa}, 20)...)
	return packet(1, payload)
}

func query(q string) []byte { return packet(0, append([]byte{comQuery}, q...)) }

const plainFlags = capProtocol41 | 0x00008000 // CLIENT_SECURE_CONNECTION, as go-sql-driver sends

// stream is a client→server byte stream and the offsets just past each COMMIT in it.
type stream struct {
	data    []byte
	commits []int
}

func (s *stream) add(b []byte, isCommit bool) {
	s.data = append(s.data, b...)
	if isCommit {
		s.commits = append(s.commits, len(s.data))
	}
}

// scan feeds data to a new scanner in chunks of at most chunk bytes, the way reads from a socket
// split it, and returns the offsets where it reported a COMMIT's end.
func scan(data []byte, chunk int) []int {
	var s commitScanner
	var ends []int
	for off := 0; off < len(data); {
		p := data[off:min(off+chunk, len(data))]
		end, ok := s.feed(p)
		off += end
		if ok {
			ends = append(ends, off)
		}
	}
	return ends
}

func TestScannerFindsCommits(t *testing.T) {
	var s stream
	s.add(handshakeResponse(plainFlags), false)
	// The authentication exchange goes on with higher sequence ids; an auth-switch response that
	// happens to look like a COMMIT is not one.
	s.add(packet(3, append([]byte{comQuery}, "COMMIT"...)), false)
	s.add(query("SELECT 1"), false)
	s.add(query("START TRANSACTION"), false)
	s.add(query("COMMIT"), true)
	s.add(query("commit"), true)
	s.add(query("  /* done */ Commit\n\tWORK ; -- trailing\n"), true)
	s.add(query("# note\nCOMMIT;"), true)
	s.add(query("COMMIT AND CHAIN"), false)
	s.add(query("COMMIT; DELETE FROM t"), false)
	s.add(query("INSERT INTO t VALUES ('COMMIT')"), false)
	s.add(query("SELECT 1 /* COMMIT */"), false)
	s.add(query("COMMITTED"), false)
	s.add(query("/*!COMMIT*/"), false)
	s.add(query("/* unterminated COMMIT"), false)
	s.add(packet(0, append([]byte{0x16}, "COMMIT"...)), false) // COM_STMT_PREPARE, not COM_QUERY
	s.add(packet(0, nil), false)
	s.add(query("COMMIT"), true)

	require.Equal(t, s.commits, scan(s.data, len(s.data)), "whole stream in one read")
	require.Equal(t, s.commits, scan(s.data, 1), "one byte per read")
	require.Equal(t, s.commits, scan(s.data, 7), "reads that split headers and payloads")
}

func TestScannerFollowsMultiPacketCommands(t *testing.T) {
	var s stream
	s.add(handshakeResponse(plainFlags), false)

	// A command of more than maxPayload bytes: its second packet (sequence id 1) is the tail of the
	// INSERT, even though its bytes read like a COMMIT.
	big := append([]byte{comQuery}, "INSERT INTO t VALUES ('"...)
	big = append(big, bytes.Repeat([]byte{'x'}, maxPayload-len(big))...)
	s.add(packet(0, big), false)
	s.add(packet(1, append([]byte{comQuery}, "COMMIT"...)), false)

	// A command of exactly maxPayload bytes ends with an empty packet.
	s.add(packet(0, big), false)
	s.add(packet(1, nil), false)

	// A command whose continuation has sequence id 0 (after 256 packets the id wraps) is still one
	// command: what decides is the length of the packet before.
	s.add(packet(0, big), false)
	s.add(packet(0, append([]byte{comQuery}, "COMMIT"...)), false)

	s.add(query("COMMIT"), true)

	require.Equal(t, s.commits, scan(s.data, len(s.data)))
	require.Equal(t, s.commits, scan(s.data, 32<<10))
	require.Equal(t, s.commits, scan(s.data, 4093))
}

func TestScannerPassesTLSAndCompressionThrough(t *testing.T) {
	for name, flags := range map[string]uint32{"tls": capSSL, "compression": capCompress} {
		t.Run(name, func(t *testing.T) {
			data := append(handshakeResponse(plainFlags|flags), query("COMMIT")...)
			require.Empty(t, scan(data, len(data)))
		})
	}
}

func TestScannerReadsQueryAttributes(t *testing.T) {
	var s stream
	s.add(handshakeResponse(plainFlags|capQueryAttributes), false)
	s.add(packet(0, append([]byte{comQuery, 0x00, 0x01}, "COMMIT"...)), true)
	// One parameter: not a plain COMMIT.
	s.add(packet(0, append([]byte{comQuery, 0x01, 0x01, 0x00, 0x01, 0xfe, 0x00, 'a', 0x00}, "COMMIT"...)), false)
	require.Equal(t, s.commits, scan(s.data, 3))
}

func TestIsCommit(t *testing.T) {
	for q, want := range map[string]bool{
		"COMMIT":               true,
		"commit":               true,
		" Commit ":             true,
		"COMMIT WORK":          true,
		"COMMIT/**/;":          true,
		"/*a*/COMMIT/*b*/":     true,
		"COMMIT -- x":          true,
		"COMMIT --x":           false, // "--" starts a comment only when followed by a space
		"COMMIT RELEASE":       false,
		"COMMITS":              false,
		"ROLLBACK":             false,
		"SELECT 'COMMIT'":      false,
		"/*M!100000 COMMIT */": false,
		"":                     false,
	} {
		require.Equal(t, want, isCommit([]byte(q)), "%q", q)
	}
}
