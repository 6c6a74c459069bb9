package demo

import "testing"

// StartMySQLForTest starts the embedded MySQL for one test.
func StartMySQLForTest(t *testing.T) *embeddedMySQL {
	t.Helper()
	m, err := startMySQL()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}
