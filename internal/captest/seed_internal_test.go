package captest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The project's own seed files, which a server started by hand loads, are
// Seed's 100 records of seed 1 (and SeedVersioned's, and
// SeedOrders' ProjectOrders orders). CAPTEST_UPDATE=1
// rewrites them.
func TestProjectSeedFiles(t *testing.T) {
	for _, f := range seedFiles(Options{Records: 100, VersionedRecords: 100, Orders: ProjectOrders, Seed: 1}) {
		want, err := f.csv()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(ProjectDir(), "db", "data", f.name)
		if os.Getenv("CAPTEST_UPDATE") == "1" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not the seed of 1: run CAPTEST_UPDATE=1 go test -run TestProjectSeedFiles ./internal/captest/", path)
		}
	}
}
