package api

import (
	"bytes"
	"image"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	qrcode "github.com/skip2/go-qrcode"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// TestCheckinQR: the owner and the venue's staff get a PNG whose modules are exactly the QR code of
// SWCHK:<checkin_code> (the smallest symbol, 8 pixels a module, quiet zone included); anyone else
// gets 404 as for the booking itself. The e2e test reads the same image with an independent decoder
// (jsQR) in a browser.
func TestCheckinQR(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	booked := hs.booking(alice, 1, 11)
	path := "/api/v1/bookings/" + booked.BookingID + "/checkin.png"

	for _, who := range []string{alice, hs.token("desk", booking.RoleStaff, hs.venueNum()), hs.admin} {
		r := hs.do(http.MethodGet, path, who, nil).expect(t, http.StatusOK)
		require.Equal(t, "image/png", r.Header.Get("Content-Type"))
		require.Contains(t, r.Header.Get("Cache-Control"), "no-store", "an entry ticket is not cached on the way")
		img, err := png.Decode(bytes.NewReader(r.Body))
		require.NoError(t, err)

		want, err := qrcode.New("SWCHK:"+booked.CheckinCode, qrcode.Medium)
		require.NoError(t, err)
		require.Equal(t, 1, want.VersionNumber, "the payload fits the smallest QR version")
		requireModules(t, want.Bitmap(), img)
	}

	for _, who := range []string{hs.token("bob", booking.RoleUser, 0), hs.token("olga", booking.RoleStaff, hs.venueNum()+1000)} {
		r := hs.do(http.MethodGet, path, who, nil).expect(t, http.StatusNotFound)
		require.Equal(t, "not_found", r.errorCode())
	}
	hs.do(http.MethodGet, path, "", nil).expect(t, http.StatusUnauthorized)
	hs.do(http.MethodGet, "/api/v1/bookings/999999/checkin.png", alice, nil).expect(t, http.StatusNotFound)
}

// requireModules checks that img draws bitmap with square modules of qrModulePixels, dark on light.
func requireModules(t *testing.T, bitmap [][]bool, img image.Image) {
	t.Helper()
	n := len(bitmap)
	require.Equal(t, image.Rect(0, 0, n*qrModulePixels, n*qrModulePixels), img.Bounds())
	for y := range n {
		for x := range n {
			for _, d := range [][2]int{{0, 0}, {qrModulePixels - 1, qrModulePixels - 1}} {
				r, g, b, _ := img.At(x*qrModulePixels+d[0], y*qrModulePixels+d[1]).RGBA()
				dark := r+g+b < 3*0x8000
				require.Equalf(t, bitmap[y][x], dark, "module (%d, %d)", x, y)
			}
		}
	}
}

// TestScanningTwiceIsHarmless: the desk's second scan of the same code answers the booking as the
// first left it (200, ARRIVED), so a double beep at the gate is no error for staff to explain. The
// first scan sends the QR code's whole payload, as a generic scanner app passes it on; the second
// the code typed by hand.
func TestScanningTwiceIsHarmless(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	alice := hs.token("alice", booking.RoleUser, 0)
	booked := hs.booking(alice, 1, 11)
	hs.clock.Set(mustTime(t, booked.Start).Add(-10 * time.Minute))
	staff := hs.token("desk", booking.RoleStaff, hs.venueNum()) // minted after the clock moved

	var first, second bookingResponse
	hs.do(http.MethodPost, "/api/v1/checkins", staff, set{"checkin_code": "SWCHK:" + booked.CheckinCode}).expect(t, http.StatusOK).decode(t, &first)
	hs.do(http.MethodPost, "/api/v1/checkins", staff, set{"checkin_code": strings.ToLower(booked.CheckinCode)}).expect(t, http.StatusOK).decode(t, &second)
	require.Equal(t, "ARRIVED", first.Status)
	require.Equal(t, first.Status, second.Status)
	require.Equal(t, first.Version, second.Version, "the second scan changed nothing")
}
