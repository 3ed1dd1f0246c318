package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func summarize(muts []*mutant) {
	counts := map[string]int{}
	for _, m := range muts {
		counts[m.Status]++
	}
	detected := counts[stKilled] + counts[stTimedOut]
	scored := detected + counts[stSurvived]
	fmt.Println()
	fmt.Printf("killed %d, timed out %d, survived %d, equivalent %d, not covered %d, not viable %d\n",
		counts[stKilled], counts[stTimedOut], counts[stSurvived], counts[stEquivalent], counts[stNotCovered], counts[stNotViable])
	if scored > 0 {
		fmt.Printf("score: %d/%d non-equivalent covered mutants detected = %.1f%%\n", detected, scored, 100*float64(detected)/float64(scored))
	}
	if counts[stSurvived] > 0 {
		fmt.Println("survivors:")
		for _, m := range muts {
			if m.Status == stSurvived {
				fmt.Printf("  %s:%d:%d %s %s\n", m.File, m.Line, m.Col, m.Op, m.Change)
			}
		}
	}
}

func testFilter(cfg config) []string {
	var a []string
	if cfg.run != "" {
		a = append(a, "-run="+cfg.run)
	}
	if cfg.skip != "" {
		a = append(a, "-skip="+cfg.skip)
	}
	return a
}

// testMutant runs the tests against one mutant through an overlay.
func testMutant(cfg config, tmp string, m *mutant, src []byte) {
	dir := filepath.Join(tmp, strconv.Itoa(m.Index))
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		m.Status, m.Detail = stNotViable, err.Error()
		return
	}
	mutFile := filepath.Join(dir, filepath.Base(m.absFile))
	overlay := filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {m.absFile: mutFile}})
	if err := os.WriteFile(mutFile, src, 0o644); err != nil {
		m.Status, m.Detail = stNotViable, err.Error()
		return
	}
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		m.Status, m.Detail = stNotViable, err.Error()
		return
	}
	args := []string{"test", "-count=1", "-vet=off", "-failfast", "-overlay=" + overlay, "-timeout=" + cfg.timeout.String()}
	args = append(args, testFilter(cfg)...)
	args = append(args, cfg.tests...)
	// The outer limit leaves room for compiling and linking on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout+3*time.Minute)
	defer cancel()
	start := time.Now()
	out, code, err := goCmd(ctx, cfg.module, args)
	m.Seconds = time.Since(start).Seconds()
	switch {
	case ctx.Err() != nil:
		m.Status = stTimedOut
		m.Detail = "killed after the outer limit"
	case code == 0 && err == nil:
		m.Status = stSurvived
		m.Detail = lastLines(out, 20)
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
		m.Status = stNotViable
		m.Detail = lastLines(out, 10)
	case strings.Contains(out, "panic: test timed out"):
		// Keep the tests that were running: one that ran for the whole
		// limit hung; one that had just started means the run was slow.
		m.Status = stTimedOut
		if _, running, ok := strings.Cut(out, "running tests:"); ok {
			m.Detail = "running tests:" + strings.Join(strings.Fields(strings.SplitN(running, "\n\n", 2)[0]), " ")
		}
	default:
		m.Status = stKilled
		m.Detail = firstFailure(out)
	}
}

func goCmd(ctx context.Context, dir string, args []string) (string, int, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	if err := cmd.Start(); err != nil {
		return "", -1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Kill the whole group: go test's children would otherwise live on.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		err = nil
	}
	return buf.String(), code, err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func firstFailure(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--- FAIL") {
			return strings.TrimSpace(l)
		}
	}
	return lastLines(s, 3)
}

func indent(s string) string {
	return "            | " + strings.ReplaceAll(s, "\n", "\n            | ")
}
