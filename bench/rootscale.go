package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.temporal.io/sdk/testsuite"
	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// RootScaleConfig configures the root-size measurements: the same
// operations on roots of different sizes, warm and cold.
type RootScaleConfig struct {
	// Dir holds the generated roots; it is removed afterwards.
	Dir string
	// Sizes are the session counts of the roots (e.g. 1000, 1000000).
	Sizes []int
	// Projects is the number of project directories of every root.
	Projects int
	// WarmRuns and ColdRuns are the repetitions of each measurement; the
	// median is kept.
	WarmRuns, ColdRuns int
	// Workers generate the roots.
	Workers int
	// DropCaches drops the page cache before a cold run; it returns an
	// error when the machine does not allow it.
	DropCaches func() error
	// Log receives progress lines.
	Log func(format string, args ...any)
}

// RootScaleResult is one root's figures.
type RootScaleResult struct {
	Sessions    int
	Generate    time.Duration // writing the root directly on disk
	Migrate     time.Duration // first operation on the unmarked root (scan + marker)
	Warm, Cold  RootScaleOps
	ColdSkipped string // why no cold figures, when there are none
}

// RootScaleOps are the medians of the measured operations.
type RootScaleOps struct {
	// OpenAppendClose is a new store's open, append of one event and
	// close of one existing session (an offline command).
	OpenAppendClose time.Duration
	// FirstCreate is a new store's first CreateHandle and Flush through
	// the activities a worker runs.
	FirstCreate time.Duration
	// FirstRow is a new store's time to the first row of Rows.
	FirstRow time.Duration
}

// rootSessionID is the id of session i of a generated root.
func rootSessionID(i int) string { return fmt.Sprintf("s%07d", i) }

// rootCwd is the cwd of session i's project.
func rootCwd(i, projects int) string { return fmt.Sprintf("/bench/p%03d", i%projects) }

// GenerateRoot writes n header-only zstd sessions of format v3 directly in
// the store's layout (FORMAT.md §3.1), spread over the project directories,
// without a root marker (a root of an earlier version).
func GenerateRoot(root string, n, projects, workers int) error {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true),
		zstd.WithSingleSegment(true), zstd.WithZeroFrames(true))
	if err != nil {
		return err
	}
	defer enc.Close()
	for p := 0; p < projects; p++ {
		key, err := jsonl.ProjectKey(rootCwd(p, projects))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(root, key), 0o700); err != nil {
			return err
		}
	}
	_, err = parallel(n, workers, func(i int) error { return writeRootSession(enc, root, i, projects) })
	return err
}

// writeRootSession writes one session directory and its log.
func writeRootSession(enc *zstd.Encoder, root string, i, projects int) error {
	h := wire.Header{Version: wire.FormatVersion, ID: rootSessionID(i), CreatedAt: 1767225600000 + int64(i), Cwd: rootCwd(i, projects)}
	line, err := jsonl.EncodeHeaderLine(h)
	if err != nil {
		return err
	}
	key, _ := jsonl.ProjectKey(h.Cwd)
	seg, err := jsonl.EncodeSegment(h.ID)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, key, seg)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	frame := enc.EncodeAll(line, nil) // line ends with its newline
	return os.WriteFile(filepath.Join(dir, "session.v3.jsonl.zstd"), frame, 0o600)
}

// MeasureRootScale generates every root and marks it through a first
// operation (the migration of a root written before the marker), writes
// everything back (sync), then measures the roots in turns, warm then cold,
// so that the machine's load moves every root's figures alike. The roots
// are removed at the end.
func MeasureRootScale(ctx context.Context, cfg RootScaleConfig) ([]RootScaleResult, error) {
	out := make([]RootScaleResult, len(cfg.Sizes))
	ms := make([]*rootMeasurer, len(cfg.Sizes))
	defer func() {
		for _, m := range ms {
			if m != nil {
				cfg.Log("removing %s", m.root)
				_ = os.RemoveAll(m.root)
			}
		}
	}()
	for k, n := range cfg.Sizes {
		root := filepath.Join(cfg.Dir, fmt.Sprintf("root-%d", n))
		r := &out[k]
		r.Sessions = n
		cfg.Log("generating %d sessions in %d project directories under %s", n, cfg.Projects, root)
		ms[k] = &rootMeasurer{root: root, n: n, projects: cfg.Projects}
		start := time.Now()
		if err := GenerateRoot(root, n, cfg.Projects, cfg.Workers); err != nil {
			return nil, err
		}
		r.Generate = time.Since(start)
		unix.Sync()
		cfg.Log("generated in %v; migrating (first operation on the unmarked root)", r.Generate.Round(time.Millisecond))
		start = time.Now()
		st, err := jsonl.NewStore(jsonl.Options{Root: root})
		if err != nil {
			return nil, err
		}
		if _, err := st.Stat(ctx, rootSessionID(0)); err != nil {
			return nil, err
		}
		r.Migrate = time.Since(start)
		cfg.Log("migrated in %v", r.Migrate.Round(time.Millisecond))
	}
	unix.Sync()
	if err := measureTurns(ctx, ms, cfg.WarmRuns, nil, func(k int, o RootScaleOps) { out[k].Warm = o }); err != nil {
		return nil, err
	}
	cfg.Log("warm done")
	if err := cfg.DropCaches(); err != nil {
		for k := range out {
			out[k].ColdSkipped = err.Error()
		}
		return out, nil
	}
	if err := measureTurns(ctx, ms, cfg.ColdRuns, cfg.DropCaches, func(k int, o RootScaleOps) { out[k].Cold = o }); err != nil {
		return nil, err
	}
	cfg.Log("cold done")
	return out, nil
}

// measureTurns runs every operation runs times on each root in turn and
// reports each root's medians.
func measureTurns(ctx context.Context, ms []*rootMeasurer, runs int, drop func() error, set func(int, RootScaleOps)) error {
	samples := make([][3][]time.Duration, len(ms))
	for i := 0; i < runs; i++ {
		for k, m := range ms {
			for op, fn := range []func(context.Context) (time.Duration, error){m.openAppendClose, m.firstCreate, m.firstRow} {
				if drop != nil {
					if err := drop(); err != nil {
						return err
					}
				}
				d, err := fn(ctx)
				if err != nil {
					return err
				}
				samples[k][op] = append(samples[k][op], d)
			}
		}
	}
	for k := range ms {
		set(k, RootScaleOps{OpenAppendClose: summarize(samples[k][0]).Median, FirstCreate: summarize(samples[k][1]).Median, FirstRow: summarize(samples[k][2]).Median})
	}
	return nil
}

// rootMeasurer runs the measured operations on one root.
type rootMeasurer struct {
	root        string
	n, projects int
	next        int // next existing session to append to
	created     int
}

// openAppendClose: a new store (a new process) opens a session spread
// across the root for writing, appends one event and closes.
func (m *rootMeasurer) openAppendClose(ctx context.Context) (time.Duration, error) {
	id := rootSessionID((m.next * 7919) % m.n)
	m.next++
	start := time.Now()
	st, err := jsonl.NewStore(jsonl.Options{Root: m.root})
	if err != nil {
		return 0, err
	}
	h, err := st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: fmt.Sprintf("bench-open-%d", m.next)})
	if err != nil {
		return 0, err
	}
	ev := session.Event{Type: "turn/start", Seq: h.NextSeq(), Time: time.Now().UnixMilli(), Data: json.RawMessage(fmt.Sprintf(`{"turn":%d}`, h.NextSeq()+1))}
	if err := h.Append(ctx, []session.Event{ev}); err != nil {
		_ = h.Close(ctx)
		return 0, err
	}
	if err := h.Close(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// firstCreate: a new store (a worker that just started) runs the
// CreateHandle and Flush activities of a new session.
func (m *rootMeasurer) firstCreate(ctx context.Context) (time.Duration, error) {
	m.created++
	id := fmt.Sprintf("new-%07d", m.created)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	start := time.Now()
	st, err := jsonl.NewStore(jsonl.Options{Root: m.root})
	if err != nil {
		return 0, err
	}
	acts := &activities.Activities{Runtime: &activities.Runtime{Store: st}}
	env.RegisterActivity(acts)
	val, err := env.ExecuteActivity(acts.CreateHandle, activities.CreateHandleInput{
		Header:   wire.Header{ID: id, CreatedAt: time.Now().UnixMilli(), Cwd: rootCwd(m.created, m.projects)},
		HandleID: "bench-create-" + id,
	})
	if err != nil {
		return 0, err
	}
	var info activities.HandleInfo
	if err := val.Get(&info); err != nil {
		return 0, err
	}
	if _, err := env.ExecuteActivity(acts.Flush, activities.HandleInput{Ref: info.Ref}); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if _, err := env.ExecuteActivity(acts.CloseHandle, activities.HandleInput{Ref: info.Ref}); err != nil {
		return 0, err
	}
	return d, nil
}

// firstRow: a new store's time to the first row of a listing.
func (m *rootMeasurer) firstRow(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	st, err := jsonl.NewStore(jsonl.Options{Root: m.root})
	if err != nil {
		return 0, err
	}
	for row, err := range st.Rows(ctx, "") {
		if err != nil {
			return 0, err
		}
		if row.Problem != nil {
			return 0, fmt.Errorf("first row %s: %s", row.Header.ID, row.Problem.Reason)
		}
		break
	}
	return time.Since(start), nil
}

// RootScaleMarkdown renders the results as the docs/PERFORMANCE.md section,
// with each operation's ratio of the largest root to the smallest.
func RootScaleMarkdown(cfg RootScaleConfig, rs []RootScaleResult) string {
	var b strings.Builder
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	fmt.Fprintf(&b, "Roots of header-only zstd sessions in %d project directories, written directly on disk; "+
		"all roots generated first and written back, then measured in turns; medians of %d warm and %d cold runs (cold: page, dentry and inode caches dropped before each operation). "+
		"Every operation starts with a new store, as a new process does.\n\n",
		cfg.Projects, cfg.WarmRuns, cfg.ColdRuns)
	b.WriteString("| sessions | generate | first operation on the unmarked root (scan + marker) |\n|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %d | %v | %s |\n", r.Sessions, r.Generate.Round(time.Millisecond), ms(r.Migrate))
	}
	b.WriteString("\n| operation | cache |")
	for _, r := range rs {
		fmt.Fprintf(&b, " %d sessions |", r.Sessions)
	}
	b.WriteString(" ratio |\n|---|---|")
	for range rs {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	rows := []struct {
		name string
		get  func(RootScaleOps) time.Duration
	}{
		{"open + append 1 event + close", func(o RootScaleOps) time.Duration { return o.OpenAppendClose }},
		{"worker's first create (CreateHandle + Flush)", func(o RootScaleOps) time.Duration { return o.FirstCreate }},
		{"first `list` row", func(o RootScaleOps) time.Duration { return o.FirstRow }},
	}
	for _, row := range rows {
		for _, cache := range []string{"warm", "cold"} {
			fmt.Fprintf(&b, "| %s | %s |", row.name, cache)
			var first, last time.Duration
			for i, r := range rs {
				o := r.Warm
				if cache == "cold" {
					o = r.Cold
				}
				d := row.get(o)
				if i == 0 {
					first = d
				}
				last = d
				if cache == "cold" && r.ColdSkipped != "" {
					b.WriteString(" n/a |")
					continue
				}
				fmt.Fprintf(&b, " %s |", ms(d))
			}
			if first > 0 {
				fmt.Fprintf(&b, " %.2fx |\n", float64(last)/float64(first))
			} else {
				b.WriteString(" n/a |\n")
			}
		}
	}
	for _, r := range rs {
		if r.ColdSkipped != "" {
			fmt.Fprintf(&b, "\nNo cold figures for %d sessions: %s\n", r.Sessions, r.ColdSkipped)
		}
	}
	return b.String()
}
