package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	qrcode "github.com/skip2/go-qrcode"
)

// checkinQRPrefix starts the payload of a check-in QR code: SWCHK:<checkin_code>. The prefix tells
// a desk's scanner that the code is a slotwheel booking's and not some other QR code it was shown;
// with an 8-letter code the payload is 14 characters of QR's alphanumeric set, which fit the
// smallest symbol (version 1, 21×21 modules) at medium error correction, so a worn or glossy phone
// screen still scans.
const checkinQRPrefix = "SWCHK:"

// qrModulePixels is the size of one module: whole pixels, so that no module is drawn wider than
// its neighbour and cheap scanners read it at arm's length.
const qrModulePixels = 8

// checkinQRPayload is what a booking's check-in QR code carries.
func checkinQRPayload(code string) string { return checkinQRPrefix + code }

// checkinQR renders a booking's check-in QR code as a PNG for the owner or the venue's staff (the
// engine's read rule), for clients that do not draw QR codes themselves.
func (s *server) checkinQR(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	b, err := s.eng.GetBooking(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	q, err := qrcode.New(checkinQRPayload(b.CheckinCode), qrcode.Medium)
	if err != nil {
		s.fail(c, err)
		return
	}
	png, err := q.PNG(-qrModulePixels)
	if err != nil {
		s.fail(c, err)
		return
	}
	// The code is the booking's entry ticket: nothing between the server and the guest keeps it.
	c.Header("Cache-Control", "private, no-store")
	c.Data(http.StatusOK, "image/png", png)
}
