package entity_test

import (
	"math/rand/v2"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
)

// twoKeys is an entity of two sources that set company and plant.
func twoKeys() *entity.Entity {
	return &entity.Entity{Name: "stock", Key: []string{"company", "plant", "item"},
		Sources: []entity.Source{{Name: "s"}, {Name: "s"}}}
}

func TestJobNames(t *testing.T) {
	e := twoKeys()
	for _, c := range []struct {
		set  map[string]string
		want string
	}{
		// Values without "/", "%", a control character or a space at
		// their end keep the names they always had.
		{map[string]string{"company": "1000", "plant": "CRONUS"}, "stock/1000/CRONUS"},
		{map[string]string{"company": "Müller GmbH", "plant": "a.b-c_d"}, "stock/Müller GmbH/a.b-c_d"},
		{map[string]string{"company": "A/B", "plant": "C"}, "stock/A%2FB/C"},
		{map[string]string{"company": "A", "plant": "B/C"}, "stock/A/B%2FC"},
		{map[string]string{"company": "100%", "plant": "%2F"}, "stock/100%25/%252F"},
		{map[string]string{"company": "A ", "plant": " B  "}, "stock/A%20/ B%20%20"},
		{map[string]string{"company": "a\tb", "plant": "\x7f"}, "stock/a%09b/%7F"},
	} {
		if got := e.Job("stock", entity.Source{Set: c.set}); got != c.want {
			t.Errorf("Job(%q) = %q, want %q", c.set, got, c.want)
		}
	}
	if got := (&entity.Entity{Name: "x", Sources: []entity.Source{{Name: "a", Set: map[string]string{"k": "a/b"}}}}).Job("x", entity.Source{}); got != "x" {
		t.Errorf("the job of a lone source is %q, want the entity's", got)
	}
}

// TestJobNamesInjective draws pairs of sets from an alphabet of the
// characters that escaping touches: two sets have one job only when they
// are one set.
func TestJobNamesInjective(t *testing.T) {
	e := twoKeys()
	alphabet := []string{"A", "B", "/", "%", "2", "F", " ", "\x1f"}
	r := rand.New(rand.NewPCG(1, 2))
	value := func() string {
		s := ""
		for range r.IntN(4) {
			s += alphabet[r.IntN(len(alphabet))]
		}
		return s
	}
	seen := map[string][2]string{}
	for range 200000 {
		v := [2]string{value(), value()}
		job := e.Job("stock", entity.Source{Set: map[string]string{"company": v[0], "plant": v[1]}})
		if old, ok := seen[job]; ok && old != v {
			t.Fatalf("sets %q and %q share the job %q", old, v, job)
		}
		seen[job] = v
	}
}
