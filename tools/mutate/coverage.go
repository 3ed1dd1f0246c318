package main

import (
	"bufio"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// coverage holds the statement blocks that ran in the baseline.
type coverage map[string][]block

type block struct {
	l1, c1, l2, c2 int
	count          int
}

func readCoverage(path, importPath, relDir string) (coverage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cov := coverage{}
	// Profile lines: importpath/file.go:l1.c1,l2.c2 statements count
	re := regexp.MustCompile(`^(.*):(\d+)\.(\d+),(\d+)\.(\d+) \d+ (\d+)$`)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		file, ok := strings.CutPrefix(m[1], importPath+"/")
		if !ok || strings.Contains(file, "/") {
			continue
		}
		file = relDir + "/" + file
		atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
		cov[file] = append(cov[file], block{atoi(m[2]), atoi(m[3]), atoi(m[4]), atoi(m[5]), atoi(m[6])})
	}
	for _, bs := range cov {
		sort.Slice(bs, func(i, j int) bool { return bs[i].l1 < bs[j].l1 })
	}
	return cov, sc.Err()
}

// covered reports whether a position lies in a block that ran. A position
// in no block at all (a package-level initializer) counts as covered.
func (c coverage) covered(file string, line, col int) bool {
	in := false
	for _, b := range c[file] {
		after := line > b.l1 || (line == b.l1 && col >= b.c1)
		before := line < b.l2 || (line == b.l2 && col <= b.c2)
		if after && before {
			in = true
			if b.count > 0 {
				return true
			}
		}
	}
	return !in
}
