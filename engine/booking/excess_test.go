package booking

import (
	"slices"
	"testing"
)

func TestFitLetsTheNewestBookingsGo(t *testing.T) {
	occ := []Occupant{
		{BookingID: 1, Quantity: 1, Slots: []string{"10", "11"}},
		{BookingID: 2, Quantity: 1, Slots: []string{"10"}},
		{BookingID: 3, Quantity: 1, Slots: []string{"11"}},
		{BookingID: 4, Quantity: 1, Slots: []string{"12"}},
	}
	if o := Fit(1, occ); !slices.Equal(o.Conflicted, []uint64{1, 2, 3}) || !slices.Equal(o.Excess, []uint64{2, 3}) || o.HoldsInTheWay {
		t.Fatalf("capacity 1: %+v", o)
	}
	if o := Fit(2, occ); o.Conflicted != nil || o.Excess != nil || o.HoldsInTheWay {
		t.Fatalf("capacity 2 holds everyone: %+v", o)
	}
	// Only as many as it takes: a big newer booking goes, the older small ones stay.
	o := Fit(3, []Occupant{
		{BookingID: 5, Quantity: 1, Slots: []string{"9"}}, {BookingID: 6, Quantity: 1, Slots: []string{"9"}},
		{BookingID: 7, Quantity: 2, Slots: []string{"9"}},
	})
	if !slices.Equal(o.Excess, []uint64{7}) || !slices.Equal(o.Conflicted, []uint64{5, 6, 7}) {
		t.Fatalf("%+v", o)
	}
}

func TestFitNeverPutsAPaidBookingBelowAHold(t *testing.T) {
	occ := []Occupant{
		{BookingID: 1, Quantity: 1, Slots: []string{"10"}},
		{HoldID: "h", Quantity: 1, Slots: []string{"10"}},
		{HoldID: "k", Quantity: 1, Slots: []string{"11"}},
	}
	// The booking fits alone; the hold beside it is in the way, and nobody is cancelled for it.
	if o := Fit(1, occ); !slices.Equal(o.Conflicted, []uint64{1}) || o.Excess != nil || !o.HoldsInTheWay {
		t.Fatalf("%+v", o)
	}
	if o := Fit(2, occ); o.Conflicted != nil || o.HoldsInTheWay {
		t.Fatalf("%+v", o)
	}
}
