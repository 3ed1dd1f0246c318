package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// reportOnly summarizes an earlier run's results file.
func reportOnly(path, equivalent string) error {
	results, err := readResults(path)
	if err != nil {
		return err
	}
	equiv := map[string]string{}
	if equivalent != "" {
		if equiv, err = readEquivalent(equivalent); err != nil {
			return err
		}
	}
	var muts []*mutant
	for _, m := range results {
		m := m
		if m.Status == stSurvived {
			if _, ok := equiv[m.Key]; ok {
				m.Status = stEquivalent
			}
		}
		muts = append(muts, &m)
	}
	sort.Slice(muts, func(i, j int) bool { return muts[i].Index < muts[j].Index })
	summarize(muts)
	return nil
}

func readResults(path string) (map[string]mutant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]mutant{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m mutant
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[m.Key] = m
	}
	return out, sc.Err()
}

func readEquivalent(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, reason, _ := strings.Cut(line, "\t")
		m[strings.TrimSpace(key)] = strings.TrimSpace(reason)
	}
	return m, sc.Err()
}
