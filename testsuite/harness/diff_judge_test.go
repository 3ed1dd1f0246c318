package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/wire"
)

// runScript runs a script of testdata/harness with the pinned Node, input
// as its stdin, and decodes its stdout into out.
func runScript(t *testing.T, script string, input, out any) {
	t.Helper()
	ctx := testdeadline.Context(t, 5*time.Minute)
	if err := runNodeScript(ctx, nodeBinary(t), script, input, out); err != nil {
		t.Fatal(err)
	}
}

// runNodeScript runs a script of testdata/harness with the Node binary
// node, input as its stdin, and decodes its stdout into out.
func runNodeScript(ctx context.Context, node, script string, input, out any) error {
	in, err := json.Marshal(input)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = harnessDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\nstderr:\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("%s output: %w\nstderr:\n%s", script, err, stderr.String())
	}
	return nil
}

// judgeInput names one session for judge.mjs.
type judgeInput struct {
	Root        string `json:"root"`
	Compression string `json:"compression"`
	ID          string `json:"id"`
	// Plain is a file holding the log's plaintext.
	Plain string `json:"plain,omitempty"`
	// CheckWriter asks the judge whether the package's writer could have
	// written the lines of Plain, CheckDamage what the package's scan of a
	// raw log drops: set where sessionflow's refusal is one an exemption
	// could allow (judge.mjs).
	CheckWriter bool `json:"checkWriter,omitempty"`
	CheckDamage bool `json:"checkDamage,omitempty"`
	// discard removes the root, and Plain when it lies outside it, once
	// both judges are done with them.
	discard bool
}

// nodeVerdict is judge.mjs's verdict on one session.
type nodeVerdict struct {
	Accepted  bool   `json:"accepted"`
	Error     string `json:"error"`
	ErrorName string `json:"errorName"`
	// Events are the loaded events, closers included.
	Events       []json.RawMessage `json:"events"`
	Meta         json.RawMessage   `json:"meta"`
	Nodes        []int64           `json:"nodes"`
	Replacements []struct {
		Seq      int64   `json:"seq"`
		Start    int64   `json:"start"`
		End      int64   `json:"end"`
		Shadowed []int64 `json:"shadowedSeqs"`
	} `json:"replacements"`
	FoldError string `json:"foldError"`
	// RoundTripDiffers is set when some complete line of the log is not
	// JSON.stringify(JSON.parse(line)); StringifyThrows when
	// JSON.stringify throws on one (see judge.mjs).
	RoundTripDiffers bool `json:"roundTripDiffers"`
	StringifyThrows  bool `json:"stringifyThrows"`
	// VerdictError says why the loaded events could not be sent (they are
	// then missing).
	VerdictError string `json:"verdictError"`
	// InvariantError is what the harness's session invariants (the
	// companions of its session and compaction packages) throw on the
	// loaded log, replayed as a resume seeds a live session ("" when they
	// pass); InvariantErrorName the error's class.
	InvariantError     string `json:"invariantError"`
	InvariantErrorName string `json:"invariantErrorName"`
	// Damage is what the package's raw scan keeps and drops of the log
	// (raw roots judged with a plaintext only).
	Damage *packageDamage `json:"damage"`
}

// packageDamage is what the package's raw scan keeps and drops of a log,
// counted with its own scan and record decoder (judge.mjs).
type packageDamage struct {
	// StoredEvents are the events of the committed prefix the scan keeps.
	StoredEvents int `json:"storedEvents"`
	// LineEvents are the events the complete lines after the header
	// decode to.
	LineEvents int `json:"lineEvents"`
	// DroppedAfterDamage are the events of the complete lines after the
	// first damaged line, which the scan drops.
	DroppedAfterDamage int `json:"droppedAfterDamage"`
}

// judgeWorkers is how many pairs of a sessionflow judge and a judge.mjs
// process judge the sessions side by side: one per CPU, up to 4.
func judgeWorkers() int { return max(1, min(runtime.GOMAXPROCS(0), 4)) }

// judgeBoth judges every session with sessionflow (goJudge) and with the
// package's own load and fold (judge.mjs), in judgeWorkers shards, each a
// goroutine feeding one Node process. In a shard the two run side by side,
// sessionflow a session ahead: the package's load writes its repairs into
// the log, so each session goes to Node once sessionflow has read it.
func judgeBoth(t *testing.T, ctx context.Context, sessions []judgeInput) ([]goVerdict, []nodeVerdict) {
	t.Helper()
	node := nodeBinary(t)
	gv := make([]goVerdict, len(sessions))
	nv := make([]nodeVerdict, len(sessions))
	workers := judgeWorkers()
	type done struct {
		err           error
		goTime, nodes time.Duration
	}
	results := make(chan done, workers)
	for w := range workers {
		go func() {
			var d done
			d.goTime, d.nodes, d.err = judgeShard(ctx, node, sessions, w, workers, gv, nv)
			results <- d
		}()
	}
	var goTime, nodeTime time.Duration
	var errs []error
	for range workers {
		d := <-results
		goTime += d.goTime
		nodeTime += d.nodes
		if d.err != nil {
			errs = append(errs, d.err)
		}
	}
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	t.Logf("judged %d sessions in %d shards: sessionflow %v, judge.mjs %v of CPU", len(sessions), workers,
		goTime.Round(time.Millisecond), nodeTime.Round(time.Millisecond))
	return gv, nv
}

// judgeShard judges sessions w, w+n, w+2n, ... with goJudge and with one
// judge.mjs process, writing their verdicts into gv and nv. It returns the
// time goJudge took and the CPU time of the Node process.
func judgeShard(ctx context.Context, node string, sessions []judgeInput, w, n int, gv []goVerdict, nv []nodeVerdict) (time.Duration, time.Duration, error) {
	cmd := exec.CommandContext(ctx, node, "judge.mjs")
	cmd.Dir = harnessDir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	var goTime time.Duration // written by the feeder, read after sent
	sent := make(chan error, 1)
	go func() {
		enc := json.NewEncoder(stdin)
		for i := w; i < len(sessions); i += n {
			s := sessions[i]
			t0 := time.Now()
			gv[i] = goJudge(ctx, s.Root, s.Compression, s.ID)
			goTime += time.Since(t0)
			s.CheckWriter = losslessRefusal(gv[i].Err)
			s.CheckDamage = errors.Is(gv[i].Err, jsonl.ErrDamageNotTorn)
			if err := enc.Encode(s); err != nil {
				sent <- err
				return
			}
		}
		sent <- stdin.Close()
	}()
	dec := json.NewDecoder(stdout)
	var removeErrs []error
	for i := w; i < len(sessions); i += n {
		if err := dec.Decode(&nv[i]); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			<-sent
			return 0, 0, fmt.Errorf("judge.mjs (shard %d) at session %d: %w\nstderr:\n%s", w, i, err, stderr.String())
		}
		if s := sessions[i]; s.discard {
			removeErrs = append(removeErrs, os.RemoveAll(s.Root))
			if s.Plain != "" && !strings.HasPrefix(s.Plain, s.Root+string(filepath.Separator)) {
				removeErrs = append(removeErrs, os.Remove(s.Plain))
			}
		}
	}
	if err := errors.Join(removeErrs...); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-sent
		return 0, 0, fmt.Errorf("judge.mjs (shard %d): removing judged roots: %w", w, err)
	}
	if err := <-sent; err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, 0, fmt.Errorf("judge.mjs (shard %d) input: %w", w, err)
	}
	if err := cmd.Wait(); err != nil {
		return 0, 0, fmt.Errorf("judge.mjs (shard %d): %w\nstderr:\n%s", w, err, stderr.String())
	}
	return goTime, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// goVerdict is sessionflow's verdict on one session.
type goVerdict struct {
	Err error
	// Header is the stored header.
	Header wire.Header
	// Events are the stored events as a read serves them; Closers the
	// interrupted-turn closers a resume appends to them.
	Events, Closers []session.Event
	Fold            session.SurfaceFold
}

// goJudge reads a session the way sessionflow loads a log of a v0 root: the
// store's read (Inspect validates the log as an open does), the harness's
// per-event checks (session.CheckHarnessEvent), the interrupted-turn closers
// of a resume (FORMAT.md §5.3, §5.5) and the surface fold of the log with
// its closers.
func goJudge(ctx context.Context, root, compression, id string) goVerdict {
	var v goVerdict
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.Compression(compression), Format: jsonl.FormatV0, FS: noSyncFS{}})
	if err != nil {
		v.Err = err
		return v
	}
	ins, err := st.Inspect(ctx, id)
	if err != nil {
		v.Err = err
		return v
	}
	v.Header, v.Events = ins.Header, ins.Events
	for _, e := range v.Events {
		if err := session.CheckHarnessEvent(e); err != nil {
			v.Err = err
			return v
		}
	}
	if v.Closers, err = session.InterruptedTurnClosers(v.Events); err != nil {
		v.Err = fmt.Errorf("closers: %w", err)
		return v
	}
	if v.Fold, err = session.FoldSurface(append(slices.Clip(v.Events), v.Closers...)); err != nil {
		v.Err = err
	}
	return v
}

// noSyncFS is the operating system's filesystem without fsync: what the
// judge reads does not depend on durability, and a read's first open of a
// root publishes the root marker, which would otherwise cost an fsync per
// session.
type noSyncFS struct{ jsonl.OSFS }

// OpenFile opens a file whose Sync does nothing.
func (fs noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	f, err := fs.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ jsonl.File }

// Sync does nothing.
func (noSyncFile) Sync() error { return nil }

// compareVerdicts returns "" when the two verdicts agree, else what differs.
func compareVerdicts(n nodeVerdict, g goVerdict) string {
	switch {
	case n.Accepted && g.Err != nil:
		return fmt.Sprintf("the package accepts, sessionflow refuses: %v", g.Err)
	case !n.Accepted && g.Err == nil:
		return fmt.Sprintf("the package refuses (%s: %s), sessionflow accepts", n.ErrorName, n.Error)
	case !n.Accepted:
		return ""
	}
	if n.FoldError != "" {
		return "the package's load accepts a log its fold refuses: " + n.FoldError
	}
	if n.VerdictError != "" {
		return "the package accepts, and its loaded events cannot be written: " + n.VerdictError
	}
	if d := compareHeader(n.Meta, g.Header); d != "" {
		return d
	}
	all := append(slices.Clip(g.Events), g.Closers...)
	if len(n.Events) != len(all) {
		return fmt.Sprintf("the package loads %d events, sessionflow %d (%d stored and %d closers)",
			len(n.Events), len(all), len(g.Events), len(g.Closers))
	}
	for i, e := range all {
		b, err := e.MarshalJSON()
		if err != nil {
			return fmt.Sprintf("event %d: %v", i, err)
		}
		if bytes.Equal(n.Events[i], b) {
			continue // the common case: both wrote the same bytes
		}
		want, got := canonJSON(n.Events[i]), canonJSON(b)
		if want != got {
			what := "event"
			if i >= len(g.Events) {
				what = "closer"
			}
			return fmt.Sprintf("%s at seq %d differs:\npackage:     %s\nsessionflow: %s", what, i, abbrev(want), abbrev(got))
		}
	}
	if !slices.Equal(n.Nodes, g.Fold.Nodes) && (len(n.Nodes) > 0 || len(g.Fold.Nodes) > 0) {
		return fmt.Sprintf("surface nodes differ:\npackage:     %v\nsessionflow: %v", n.Nodes, g.Fold.Nodes)
	}
	if len(n.Replacements) != len(g.Fold.Replacements) {
		return fmt.Sprintf("the package folds %d replacements, sessionflow %d", len(n.Replacements), len(g.Fold.Replacements))
	}
	for i, r := range n.Replacements {
		o := g.Fold.Replacements[i]
		if r.Seq != o.Seq || r.Start != o.Start || r.End != o.End || !slices.Equal(r.Shadowed, o.Shadowed) {
			return fmt.Sprintf("replacement %d differs: package %+v, sessionflow %+v", i, r, o)
		}
	}
	return ""
}

// compareHeader compares the header the package loads with sessionflow's.
func compareHeader(meta json.RawMessage, h wire.Header) string {
	line, err := jsonl.EncodeHeaderLine(h)
	if err != nil {
		return fmt.Sprintf("header: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return fmt.Sprintf("header: %v", err)
	}
	delete(m, "type")
	b, _ := json.Marshal(m)
	if want, got := canonJSON(meta), canonJSON(b); want != got {
		return fmt.Sprintf("header differs:\npackage:     %s\nsessionflow: %s", want, got)
	}
	return ""
}

// canonJSON renders JSON text as a comparable string: keys sorted, numbers
// by their float64 value (as JavaScript holds them), and a replace surfaceOp
// in one spelling ({op, start, end}), since sessionflow and the package name
// its bounds differently in memory.
func canonJSON(b []byte) string {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "invalid JSON: " + err.Error()
	}
	if m, ok := v.(map[string]any); ok {
		if op, ok := m["surfaceOp"].(map[string]any); ok && op["op"] == "replace" {
			if s, ok := op["startSeq"]; ok {
				op["start"] = s
				delete(op, "startSeq")
			}
			if e, ok := op["endSeq"]; ok {
				op["end"] = e
				delete(op, "endSeq")
			}
		}
	}
	var sb strings.Builder
	writeCanon(&sb, v)
	return sb.String()
}

func writeCanon(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			q, _ := json.Marshal(k)
			sb.Write(q)
			sb.WriteByte(':')
			writeCanon(sb, x[k])
		}
		sb.WriteByte('}')
	case []any:
		sb.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeCanon(sb, e)
		}
		sb.WriteByte(']')
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			sb.WriteString(string(x))
			return
		}
		if f == 0 {
			f = 0
		}
		sb.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	default:
		q, _ := json.Marshal(x)
		sb.Write(q)
	}
}

// abbrev shortens a text for a failure message.
func abbrev(s string) string {
	const max = 600
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
