package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/engine"
)

// erasedResponse answers POST /api/v1/admin/users/{id}/erase: the pseudonym the user's records carry
// now, and how many records of each kind carry it. It never repeats the erased id, so that neither a
// stored idempotent answer nor a log of answers keeps it.
type erasedResponse struct {
	Pseudonym string       `json:"pseudonym"`
	Erased    erasedCounts `json:"erased"`
}

type erasedCounts struct {
	Bookings       int `json:"bookings"`
	BookingHistory int `json:"booking_history"`
	Waitlist       int `json:"waitlist"`
	Refunds        int `json:"refunds"`
	WechatOrders   int `json:"wechat_orders"`
	Events         int `json:"events"`
	StoredAnswers  int `json:"stored_answers"`
	Holds          int `json:"holds"`
}

func toErasedResponse(e engine.Erased) erasedResponse {
	return erasedResponse{Pseudonym: e.Pseudonym, Erased: erasedCounts{Bookings: e.Bookings, BookingHistory: e.History,
		Waitlist: e.Waitlist, Refunds: e.Refunds, WechatOrders: e.WechatOrders, Events: e.Events,
		StoredAnswers: e.StoredAnswers, Holds: e.Holds}}
}

// eraseUser anonymises a user (PIPL). The path names the user by their id; a segment that cannot be
// a user id — a pseudonym included — names nobody (404), as a path id that is not an id does elsewhere.
func (rt *bookingRoutes) eraseUser(c *gin.Context) {
	id := c.Param("id")
	if !auth.ValidUserID(id) {
		rt.Fail(c, answer.ErrNotFound)
		return
	}
	if !rt.BindEmpty(c) {
		return
	}
	out, err := rt.bookings.EraseUser(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toErasedResponse(out))
}
