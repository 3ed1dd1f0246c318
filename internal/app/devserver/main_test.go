package devserver

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// cliPath is the Temporal CLI located once for the package's tests.
var cliPath string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	p, err := Locate(ctx, LocateOptions{Progress: os.Stderr})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "locating the Temporal CLI:", err)
		os.Exit(1)
	}
	cliPath = p
	os.Exit(m.Run())
}
