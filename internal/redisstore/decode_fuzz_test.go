package redisstore

import (
	"encoding/binary"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// holdFields are the fields of a hold's HASH that decodeHold reads, in the order FuzzDecodeHold
// fills them.
var holdFields = []string{hfStatus, hfID, hfUser, hfVenue, hfResource, hfService, hfQty, hfStart, hfEnd, hfOStart,
	hfOEnd, hfDeadline, hfCreated, hfAmount, hfSlots, hfDays, hfSince, hfBookingID, hfRetaken, hfOrderNo, hfRoles}

// redisArg writes an HSET argument as go-redis sends it (and Redis then stores it).
func redisArg(t *testing.T, v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	}
	t.Fatalf("the hold record has a field of type %T, which this test cannot write as Redis would", v)
	return ""
}

// encodeHold writes a record as the scripts leave it in Redis: pairs() as the hold scripts store them,
// and the fields the scripts write themselves.
func encodeHold(t *testing.T, r HoldRecord) map[string]string {
	m := map[string]string{hfStatus: string(r.Status), hfSlots: strings.Join(r.Fields, listSep), hfOrderNo: r.OrderNo}
	p := r.pairs()
	for i := 0; i < len(p); i += 2 {
		m[p[i].(string)] = redisArg(t, p[i+1])
	}
	if !r.Since.IsZero() {
		m[hfSince] = strconv.FormatInt(r.Since.UnixMilli(), 10)
	}
	if r.BookingID != 0 {
		m[hfBookingID] = strconv.FormatUint(r.BookingID, 10)
	}
	if r.Retaken {
		m[hfRetaken] = "1"
	}
	var roles []string
	for _, x := range r.Roles {
		roles = append(roles, escapeRole.Replace(x.Role)+"="+strconv.FormatUint(x.ResourceID, 10))
	}
	m[hfRoles] = strings.Join(roles, listSep)
	return m
}

// FuzzDecodeHold feeds decodeHold any HASH (values a NUL-separated list, one per field of
// holdFields, plus what the scripts never write). It never fails on what it reads: a HASH without
// an id is no hold, one with an id keeps its text fields verbatim, and reading is a fixed point —
// the record read, written back as the scripts would, reads the same. Any role name survives its
// escaping.
func FuzzDecodeHold(f *testing.F) {
	f.Fuzz(func(t *testing.T, values string, extraKey, extraValue, role string) {
		m := map[string]string{extraKey: extraValue}
		for i, v := range strings.Split(values, "\x00") {
			if i < len(holdFields) {
				m[holdFields[i]] = v
			}
		}
		r, ok := decodeHold(m)
		require.Equal(t, m[hfID] != "", ok, "a hold is a HASH with an id")
		require.Equal(t, unescapeRole.Replace(escapeRole.Replace(role)), role, "a role name does not survive its escaping")
		if !ok {
			require.Zero(t, r)
			return
		}
		require.Equal(t, m[hfID], r.ID)
		require.Equal(t, m[hfUser], r.UserID)
		require.Equal(t, m[hfOrderNo], r.OrderNo)
		require.Equal(t, m[hfStatus], string(r.Status))
		require.Equal(t, m[hfRetaken] == "1", r.Retaken)
		again, ok := decodeHold(encodeHold(t, r))
		require.True(t, ok)
		require.Equal(t, r, again, "a record read and written back reads otherwise")
	})
}

// FuzzReplyStrings feeds replyStrings the shapes a script's reply can take in go-redis (a table of
// strings, integers and nils) and shapes it must refuse (anything else, at the top or inside), built
// from the input: each element is a kind byte and, for strings and integers, 8 bytes of it. A
// refusal is an error, never a panic; an accepted reply keeps its length and each element's text.
func FuzzReplyStrings(f *testing.F) {
	f.Fuzz(func(t *testing.T, top uint8, data []byte) {
		var elems []any
		valid := top%4 == 0
		for len(data) > 0 {
			kind := data[0]
			data = data[1:]
			chunk := data[:min(8, len(data))]
			switch kind % 6 {
			case 0:
				elems = append(elems, string(chunk))
				data = data[len(chunk):]
			case 1:
				var b [8]byte
				copy(b[:], chunk)
				elems = append(elems, int64(binary.LittleEndian.Uint64(b[:])))
				data = data[len(chunk):]
			case 2:
				elems = append(elems, nil)
			case 3:
				elems = append(elems, []any{string(chunk)}) // a nested table: no script of ours answers one
				valid = false
			case 4:
				elems = append(elems, redisError(string(chunk))) // an error reply inside the table
				valid = false
			case 5:
				elems = append(elems, float64(len(chunk)))
				valid = false
			}
		}
		var reply any = elems
		switch top % 4 {
		case 1:
			reply = "ok"
		case 2:
			reply = int64(len(elems))
		case 3:
			reply = nil
		}
		out, err := replyStrings(reply, nil)
		if !valid {
			require.Error(t, err)
			require.Nil(t, out)
			return
		}
		require.NoError(t, err)
		require.Len(t, out, len(elems))
		for i, e := range elems {
			switch x := e.(type) {
			case string:
				require.Equal(t, x, out[i])
			case int64:
				require.Equal(t, strconv.FormatInt(x, 10), out[i])
			case nil:
				require.Empty(t, out[i])
			}
		}
		cause := errors.New("connection refused")
		out, err = replyStrings(reply, cause)
		require.ErrorIs(t, err, cause, "a failed call's error is passed on")
		require.Nil(t, out)
	})
}

// redisError is an error reply as go-redis hands it over inside a table.
type redisError string

func (e redisError) Error() string { return string(e) }

// holdIDShape is what NewHoldID makes: the venue in decimal and 10 random bytes in hex.
var holdIDShape = regexp.MustCompile(`^h[0-9]+_[0-9a-fA-F]{20}$`)

// hashTag is the part of a key Redis Cluster hashes: the first {…} with something inside.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// FuzzKeyNames reads the names this package builds — hold ids, owners, slot and day fields — back
// from what it wrote, and reads any text without failing: a hold id names its venue only in the shape
// NewHoldID makes, an owner is a hold or a booking but never both, and every key of a venue,
// user-named ones included, hashes to the venue's tag.
func FuzzKeyNames(f *testing.F) {
	f.Fuzz(func(t *testing.T, venue, resource uint64, minute int64, day, text, user string) {
		if venue > 0 {
			id := NewHoldID(venue)
			v, ok := HoldVenue(id)
			require.True(t, ok && v == venue, "%s names venue %d", id, v)
			got, ok := HoldOwner(id).Hold()
			require.True(t, ok && got == id)
		}
		if v, ok := HoldVenue(text); ok {
			require.Positive(t, v)
			require.Regexp(t, holdIDShape, text)
		}
		b, ok := BookingOwner(resource).Booking()
		require.True(t, ok && b == resource)
		_, isHold := Owner(text).Hold()
		_, isBooking := Owner(text).Booking()
		require.False(t, isHold && isBooking, "%q is a hold and a booking", text)

		require.Equal(t, resource, FieldResource(SlotField(resource, minute)))
		require.Equal(t, resource, DayResource(DayField(resource, day)))
		require.Equal(t, day, DayOf(DayField(resource, day)))
		FieldResource(text) // any text reads as some resource (0: none), never a panic
		DayResource(text)
		DayOf(text)

		vk := NewKeys("fuzz").Venue(venue)
		tag := "v" + strconv.FormatUint(venue, 10)
		for _, k := range []string{vk.Capacity(), vk.Used(), vk.Owners(), vk.Gone(), vk.Days(), vk.Wheel(), vk.Ended(),
			vk.Confirming(), vk.Moves(), vk.Hold(text), vk.UserHolds(user), vk.UserLive(user)} {
			require.Equal(t, tag, hashTag(k), "%s is not in venue %d's slot", k, venue)
		}
	})
}
