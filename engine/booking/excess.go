package booking

import (
	"cmp"
	"slices"
)

// Occupant is what takes units of a resource's slots when its capacity or grid changes: a booking,
// or a live hold (HoldID set), with its units on each slot it takes.
type Occupant struct {
	BookingID uint64
	HoldID    string
	Quantity  int
	Slots     []string
}

// Overflow is what does not fit a resource's slots at a new capacity.
type Overflow struct {
	// Conflicted are the bookings on a slot whose occupants take more than the capacity, for a
	// refusal to name; nil when everyone fits.
	Conflicted []uint64
	// Excess are the bookings that must give way for the other bookings to fit: the newest first
	// (highest id), since those who booked earlier were promised first, and only as many as it
	// takes.
	Excess []uint64
	// HoldsInTheWay is whether live holds still overfill a slot without the excess bookings. A
	// hold is neither cancelled nor given up for a change — its owner may be paying — so such a
	// change waits until the holds are paid or lapse.
	HoldsInTheWay bool
}

// Fit decides what of occupants does not fit capacity units a slot.
func Fit(capacity int, occupants []Occupant) Overflow {
	var out Overflow
	booked, held := map[string]int{}, map[string]int{}
	var bookings []Occupant
	for _, o := range occupants {
		to := held
		if o.HoldID == "" {
			to = booked
			bookings = append(bookings, o)
		}
		for _, s := range o.Slots {
			to[s] += o.Quantity
		}
	}
	over := func(o Occupant, withHolds bool) bool {
		return slices.ContainsFunc(o.Slots, func(s string) bool {
			n := booked[s]
			if withHolds {
				n += held[s]
			}
			return n > capacity
		})
	}
	for _, o := range bookings {
		if over(o, true) {
			out.Conflicted = append(out.Conflicted, o.BookingID)
		}
	}
	slices.SortFunc(bookings, func(a, b Occupant) int { return cmp.Compare(b.BookingID, a.BookingID) })
	for _, o := range bookings {
		if over(o, false) {
			out.Excess = append(out.Excess, o.BookingID)
			for _, s := range o.Slots {
				booked[s] -= o.Quantity
			}
		}
	}
	for s, n := range held {
		if booked[s]+n > capacity {
			out.HoldsInTheWay = true
		}
	}
	slices.Sort(out.Conflicted)
	slices.Sort(out.Excess)
	return out
}
