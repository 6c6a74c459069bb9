package verify

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
)

// A document's lines are compared line by line, by their key within the
// document: a line the feed serves and the table lacks is missing, one
// the table holds and the feed does not is extra, and one whose values
// differ is stale. Only documents whose header matches the feed (the same
// version and fields) are compared line by line: any other is stale or
// missing already, and its repair writes its lines whole.

// lineSum is one line of a document as the feed served it or the table
// holds it: its key text within the document and the hashes of its values.
type lineSum struct {
	key          string
	sum, rounded uint64
}

// childShape is what comparing one child's lines needs: the indexes of its
// key columns and the kinds of its columns.
type childShape struct {
	name  string
	keys  []int
	kinds []entity.Kind
}

func shapesOf(e *entity.Entity) []childShape {
	out := make([]childShape, len(e.Children))
	for i, c := range e.Children {
		s := childShape{name: c.Name, keys: c.KeyIndexes()}
		for _, col := range c.Columns {
			s.kinds = append(s.kinds, col.Type.Kind)
		}
		out[i] = s
	}
	return out
}

// sums returns the lines of one child of a document, sorted by key.
func (c childShape) sums(lines entity.Lines) []lineSum {
	out := make([]lineSum, len(lines))
	parts := make([]string, len(c.keys))
	for i, l := range lines {
		for j, k := range c.keys {
			parts[j] = l[k].Text(c.kinds[k])
		}
		out[i] = lineSum{key: entity.KeyText(parts), sum: valsSum(l, time.Time{}, 0), rounded: valsSum(l, time.Time{}, 1)}
	}
	slices.SortFunc(out, func(a, b lineSum) int { return strings.Compare(a.key, b.key) })
	return out
}

// lineDiff counts what the table's lines of one child of a document lack,
// add and change against the feed's: both sorted by key. It returns
// whether they differ.
func (r *Result) lineDiff(doc, child string, feed, table []lineSum) bool {
	name := func(key string) string { return doc + " " + child + "[" + key + "]" }
	differ := false
	i, j := 0, 0
	for i < len(feed) || j < len(table) {
		switch {
		case j == len(table) || i < len(feed) && feed[i].key < table[j].key:
			r.LinesMissing.Add(name(feed[i].key))
			i++
		case i == len(feed) || table[j].key < feed[i].key:
			r.LinesExtra.Add(name(table[j].key))
			j++
		default:
			if table[j].sum != feed[i].sum && table[j].sum != feed[i].rounded {
				r.LinesStale.Add(name(feed[i].key))
			} else {
				i, j = i+1, j+1
				continue
			}
			i, j = i+1, j+1
		}
		differ = true
	}
	return differ
}

// compareLines compares, child by child, the lines of every document whose
// header matched (matched: key to its want) with the lines the table
// holds, and returns the keys of the documents whose lines differ.
func (f *Feed) compareLines(ctx context.Context, st *store.Store, res *Result, matched map[string]*want) ([]string, error) {
	shapes := shapesOf(st.Table().Entity())
	differ := map[string]bool{}
	for ci, c := range shapes {
		seen := make(map[string]bool, len(matched))
		err := st.ScanLines(ctx, ci, nil, func(key string, lines entity.Lines) error {
			w := matched[key]
			if w == nil {
				return nil // the header is stale, missing or soft-deleted: compared as a row
			}
			seen[key] = true
			if res.lineDiff(key, c.name, c.sums(w.children[ci]), c.sums(lines)) {
				differ[key] = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for key, w := range matched {
			if !seen[key] && len(w.children[ci]) > 0 && res.lineDiff(key, c.name, c.sums(w.children[ci]), nil) {
				differ[key] = true
			}
		}
	}
	out := make([]string, 0, len(differ))
	for k := range differ {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}
