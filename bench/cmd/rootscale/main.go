// Command rootscale measures the store on roots of different sizes (docs/
// PERFORMANCE.md "Root size"): it writes roots of small sessions directly
// on disk, then times, warm and cold, a new store's open, append and close
// of one session, a worker's first create, and the first row of a listing.
// The roots are removed afterwards. Cold runs drop the page cache
// (/proc/sys/vm/drop_caches), which needs root.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8: it
// may import bench and what bench may.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"

	"github.com/sessionflow/sessionflow/bench"
)

func main() {
	dir := flag.String("dir", "", "directory for the generated roots (required; a temp directory is made inside it)")
	sizes := flag.String("sizes", "1000,1000000", "session counts of the roots")
	projects := flag.Int("projects", 100, "project directories of every root")
	warm := flag.Int("warm-runs", 9, "warm repetitions of each measurement")
	cold := flag.Int("cold-runs", 5, "cold repetitions of each measurement")
	workers := flag.Int("workers", 64, "goroutines writing the roots")
	out := flag.String("out", "", "write the markdown section to this file (default: stdout)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("rootscale: -dir is required")
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			log.Fatalf("rootscale: bad -sizes entry %q", s)
		}
		ns = append(ns, n)
	}
	tmp, err := os.MkdirTemp(*dir, "rootscale-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cfg := bench.RootScaleConfig{
		Dir: tmp, Sizes: ns, Projects: *projects, WarmRuns: *warm, ColdRuns: *cold, Workers: *workers,
		DropCaches: dropCaches,
		Log:        func(format string, args ...any) { log.Printf(format, args...) },
	}
	rs, err := bench.MeasureRootScale(context.Background(), cfg)
	if err != nil {
		os.RemoveAll(tmp)
		log.Fatal(err)
	}
	md := bench.RootScaleMarkdown(cfg, rs)
	if *out == "" {
		fmt.Print(md)
		return
	}
	if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
		log.Fatal(err)
	}
}

// dropCaches writes back dirty pages and drops the page, dentry and inode
// caches.
func dropCaches() error {
	if err := syncAll(); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200); err != nil {
		return fmt.Errorf("cannot drop the page cache: %w", err)
	}
	return nil
}
