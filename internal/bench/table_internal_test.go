package bench

import "testing"

// A missed goal never prints as its target: the value gets the digits
// that tell it apart; a met one, or one two decimals already tell apart,
// keeps two.
func TestGoalShown(t *testing.T) {
	for _, c := range []struct {
		value float64
		goal  string
		met   bool
		want  string
	}{
		{0.7968, ">= 0.8", false, "0.797"},
		{0.79996, ">= 0.8", false, "0.8000"},
		{0.72, ">= 0.8", false, "0.72"},
		{0.8012, ">= 0.8", true, "0.80"},
		{1.2512, "<= 1.25", false, "1.251"},
		{104.5, "< 150", true, "104.50"},
		{9.996, ">= 10", false, "9.996"},
	} {
		g := Goal{Name: "g", Value: c.value, Goal: c.goal, Met: c.met}
		if got := g.shown(); got != c.want {
			t.Errorf("%v %s (met %v): shown %s, want %s", c.value, c.goal, c.met, got, c.want)
		}
	}
}
