package api

import (
	"github.com/slotwheel/slotwheel/engine"
	"github.com/slotwheel/slotwheel/engine/booking"
	"github.com/slotwheel/slotwheel/engine/wire"
)

// Holds, bookings and waitlist entries are shown as engine/wire writes them, the same document the
// events announcing their changes carry.
type (
	holdResponse    = wire.Hold
	bookingResponse = wire.Booking
	refundResponse  = wire.Refund
)

func toHoldResponse(h booking.Hold) holdResponse          { return wire.FromHold(h) }
func toBookingResponse(b booking.Booking) bookingResponse { return wire.FromBooking(b) }

type historyEntryResponse struct {
	From   string `json:"from"`
	To     string `json:"to"`
	At     string `json:"at"`
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

func toHistoryResponse(h engine.HistoryEntry) historyEntryResponse {
	return historyEntryResponse{From: h.From, To: h.To, At: formatTime(h.At), Actor: h.Actor, Reason: h.Reason}
}

type paymentResponse struct {
	Outcome   string           `json:"outcome"`
	PaymentID string           `json:"payment_id"`
	HoldID    string           `json:"hold_id"`
	Booking   *bookingResponse `json:"booking,omitempty"`
}

func toPaymentResponse(p engine.PaymentResult) paymentResponse {
	out := paymentResponse{Outcome: p.Outcome, PaymentID: p.PaymentID, HoldID: p.HoldID}
	if p.Booking != nil && p.Outcome == engine.OutcomeBooked {
		b := toBookingResponse(*p.Booking)
		out.Booking = &b
	}
	return out
}
