package erp_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
)

// Pages through a feed of five records, two at a time, from an erpmock
// started in-process.
func Example() {
	srv := httptest.NewServer(erpmock.New(erpmock.Options{Records: 5, Seed: 1}))
	defer srv.Close()
	c, err := erp.New(erp.Config{BaseURL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	n, _ := c.Count(ctx, time.Time{}, time.Time{})
	fmt.Println("count", n)
	q := erp.Query{Limit: 2}
	for {
		p, err := c.Page(ctx, q)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, r := range p.Records {
			fmt.Println(r.ErpID, r.UpdatedAt.Format(time.RFC3339Nano))
		}
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	// Output:
	// count 5
	// M0000001 2025-01-01T00:00:00Z
	// M0000002 2025-01-01T00:00:00Z
	// M0000003 2025-01-01T00:00:00Z
	// M0000004 2025-01-01T00:00:00Z
	// M0000005 2025-01-01T00:00:00.001Z
}
