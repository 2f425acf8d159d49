package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	qrcode "github.com/skip2/go-qrcode"

	"github.com/slotwheel/slotwheel/engine/booking"
)

// qrModulePixels is the size of one module: whole pixels, so that no module is drawn wider than
// its neighbour and cheap scanners read it at arm's length.
const qrModulePixels = 8

// checkinQR renders a booking's check-in QR code as a PNG for the owner or the venue's staff (the
// engine's read rule), for clients that do not draw QR codes themselves.
func (rt *bookingRoutes) checkinQR(c *gin.Context) {
	b, ok := rt.pathBooking(c)
	if !ok {
		return
	}
	q, err := qrcode.New(booking.CheckinQRPayload(b.CheckinCode), qrcode.Medium)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	png, err := q.PNG(-qrModulePixels)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	// The code is the booking's entry ticket: nothing between the server and the guest keeps it.
	c.Header("Cache-Control", "private, no-store")
	c.Data(http.StatusOK, "image/png", png)
}
