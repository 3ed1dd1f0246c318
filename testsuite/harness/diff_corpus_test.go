package harness

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
)

// corpusDir holds the session logs of the harness repository's snapshots
// (see its README).
const corpusDir = "../../testdata/harness-corpus"

// corpusCwd is the workspace the restored corpus logs name as their cwd.
const corpusCwd = "/work/project"

// corpusLogs lists the corpus logs by their path relative to corpusDir, in
// order.
func corpusLogs(t *testing.T) []string {
	t.Helper()
	var rels []string
	err := filepath.WalkDir(corpusDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			rel, err := filepath.Rel(corpusDir, path)
			if err != nil {
				return err
			}
			rels = append(rels, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rels)
	if len(rels) == 0 {
		t.Fatalf("no session log under %s", corpusDir)
	}
	return rels
}

// restoredLog is one corpus log as restore.mjs restored it in one encoding.
type restoredLog struct {
	Rel         string `json:"rel"`
	Compression string `json:"compression"`
	Root        string `json:"root"`
	ID          string `json:"id"`
	// Events counts the restored events, Rows the packed rows of the
	// normalised log.
	Events int `json:"events"`
	Rows   int `json:"rows"`
	// Loaded reports whether the package's load accepted the restored log.
	Loaded    bool   `json:"loaded"`
	Error     string `json:"error"`
	ErrorName string `json:"errorName"`
}

// restoreCorpus has the package write every corpus log, restored, into a
// root of its own under outDir, per encoding (restore.mjs).
func restoreCorpus(t *testing.T, outDir string, compressions ...string) []restoredLog {
	t.Helper()
	dir, err := filepath.Abs(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	type log struct {
		Rel  string `json:"rel"`
		Path string `json:"path"`
	}
	var logs []log
	for _, rel := range corpusLogs(t) {
		logs = append(logs, log{rel, filepath.Join(dir, filepath.FromSlash(rel))})
	}
	// The logs are restored in judgeWorkers processes, a log every
	// judgeWorkers to each, and put back in order.
	n := judgeWorkers()
	shards := make([][]restoredLog, n)
	errs := make([]error, n)
	ctx := testdeadline.Context(t, 5*time.Minute)
	node := nodeBinary(t)
	var wg sync.WaitGroup
	for w := range n {
		var part []log
		for i := w; i < len(logs); i += n {
			part = append(part, logs[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = runNodeScript(ctx, node, "restore.mjs", map[string]any{"cwd": corpusCwd, "outDir": outDir, "compressions": compressions, "logs": part}, &shards[w])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var out []restoredLog
	for i := range logs {
		// restore.mjs writes a log's encodings one after the other.
		w, k := i%n, i/n*len(compressions)
		if k+len(compressions) > len(shards[w]) {
			t.Fatalf("restore.mjs (shard %d) restored %d logs, fewer than it was given", w, len(shards[w]))
		}
		for _, r := range shards[w][k : k+len(compressions)] {
			if r.Rel != logs[i].Rel {
				t.Fatalf("restore.mjs (shard %d) restored %s in the place of %s", w, r.Rel, logs[i].Rel)
			}
			out = append(out, r)
		}
	}
	if len(out) != len(logs)*len(compressions) {
		t.Fatalf("restore.mjs restored %d logs, want %d", len(out), len(logs)*len(compressions))
	}
	return out
}

// logFile returns the one log file under a root restore.mjs wrote.
func logFile(t *testing.T, root string) string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".jsonl") || strings.HasSuffix(path, ".jsonl.zstd")) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("%s holds %d logs, want 1: %v", root, len(found), found)
	}
	return found[0]
}
