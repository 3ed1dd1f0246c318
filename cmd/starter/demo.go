package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func newLogDemoCmd(a *app, sf *storeFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Show a crash in the middle of a turn and its repair, on a local store",
		Long: `Run the story of a durable session on a store root (a new temporary
directory unless --root or $` + envRoot + ` is given): create a session, append a
completed turn, start a second turn whose assistant asks for two tools and whose
first tool call is recorded, then crash: the process dies holding the write
lease and leaves a torn last record. The demo then inspects the damage,
forfeits the dead owner's lease, repairs the log as a resume does (the torn
record is cut, the interrupted turn is closed) and prints the final log.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !a.hasRoot(sf) {
				dir, err := os.MkdirTemp("", "sessionflow-demo-")
				if err != nil {
					return err
				}
				sf.root = dir
			}
			st, err := a.openStore(sf)
			if err != nil {
				return err
			}
			return runDemo(cmd.Context(), a, st)
		},
	}
}

// demoStep prints a numbered step heading.
type demoOut struct {
	w io.Writer
	n int
}

func (d *demoOut) step(format string, args ...any) {
	d.n++
	fmt.Fprintf(d.w, "\n== %d. %s\n", d.n, fmt.Sprintf(format, args...))
}

func runDemo(ctx context.Context, a *app, st *jsonl.Store) error {
	out := &demoOut{w: a.stdout}
	now := a.now().UnixMilli()
	id := "demo-" + randhex.String(4)
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "store root: %s (compression %s)\n", st.Root(), st.Compression())

	out.step("create session %q", id)
	h, err := st.Create(ctx, wire.Header{ID: id, CreatedAt: now, Cwd: cwd}, jsonl.CreateOptions{HandleID: newHandleID(), Owner: newOwner()})
	if err != nil {
		return err
	}
	turn1, err := demoTurnOne(now)
	if err != nil {
		return err
	}
	out.step("append turn 1 (%d events, one fsynced batch)", len(turn1))
	if err := h.Append(ctx, turn1); err != nil {
		return err
	}
	if err := printEvents(a.stdout, turn1); err != nil {
		return err
	}
	turn2, err := demoTurnTwo(int64(len(turn1)), now+1000)
	if err != nil {
		return err
	}
	out.step("start turn 2: the assistant asks for two tools; the first call is recorded")
	if err := h.Append(ctx, turn2); err != nil {
		return err
	}
	if err := printEvents(a.stdout, turn2); err != nil {
		return err
	}

	out.step("crash: the process dies holding the lease, in the middle of writing a record")
	snap, err := st.Stat(ctx, id)
	if err != nil {
		return err
	}
	if err := appendTorn(snap.Path, st.Compression()); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "torn bytes appended to %s; the handle is never closed\n", filepath.Base(snap.Path))

	out.step("inspect the damaged log (reads never modify it)")
	in, err := st.Inspect(ctx, id)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(a.stdout, buildReport(in).text()); err != nil {
		return err
	}

	out.step("a new writer is refused while the dead owner's lease stands")
	if _, err := st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID(), Owner: newOwner()}); err != nil {
		fmt.Fprintf(a.stdout, "open for write: %v\n", err)
	} else {
		return fmt.Errorf("demo: a second writer was admitted while the lease was held")
	}
	lease, err := st.ForceUnlock(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "forfeited the lease of %s\n", describeLease(lease))

	out.step("repair as a resume does: cut the torn record, close the interrupted turn, mark the end of the seed")
	rh, err := openWrite(ctx, st, id)
	if err != nil {
		return err
	}
	appended, err := repair(ctx, rh, a.now().UnixMilli())
	if err := closeHandle(ctx, rh, err); err != nil {
		return err
	}
	if err := printEvents(a.stdout, appended); err != nil {
		return err
	}

	out.step("the final log (header, then one event per line)")
	if err := printLog(ctx, a.stdout, st, id); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "inspect it again with:\n  starter log cat --root %s --compression %s --id %s\n",
		st.Root(), st.Compression(), id)
	return nil
}

// appendTorn simulates a write cut short by a crash: half a record (raw) or
// the first bytes of a frame (zstd) at the end of the log.
func appendTorn(path string, comp jsonl.Compression) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	torn := []byte(`{"type":"tool/result","seq":9,"ti`)
	if comp == jsonl.CompressionZstd {
		torn = []byte{0x28, 0xB5, 0x2F, 0xFD, 0x24, 0x40} // a frame header without its blocks
	}
	_, err = f.Write(torn)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func demoEvents(specs []struct {
	typ  string
	data any
}, first, time int64) ([]session.Event, error) {
	out := make([]session.Event, 0, len(specs))
	for i, s := range specs {
		e, err := session.NewEvent(s.typ, first+int64(i), time+int64(i), s.data)
		if err != nil {
			return nil, err
		}
		if session.SurfaceEligible(s.typ) {
			e.SurfaceOp = session.AppendOp()
		}
		out = append(out, e)
	}
	return out, nil
}

type spec = struct {
	typ  string
	data any
}

type obj = map[string]any

// demoSource is the model source of the demo's answers, which the
// published harness requires on every assistant message.
var demoSource = obj{"kind": "model", "provider": "demo", "model": "demo"}

func demoTurnOne(now int64) ([]session.Event, error) {
	return demoEvents([]spec{
		{wire.TypeTurnStart, obj{"turn": 1}},
		{wire.TypeUserMessage, obj{"id": "u1", "role": "user", "source": obj{"kind": "user"}, "content": []any{obj{"type": "text", "text": "What is in this directory?"}}}},
		{wire.TypeStepStart, obj{"turn": 1, "step": 1}},
		{wire.TypeAssistantMessage, obj{"turn": 1, "step": 1, "message": obj{"id": "assistant-1-1", "role": "assistant", "source": demoSource, "content": []any{obj{"type": "text", "text": "A Go module: sessionflow."}}}}},
		{wire.TypeStepEnd, obj{"turn": 1, "step": 1}},
		{wire.TypeTurnEnd, obj{"turn": 1, "reason": obj{"kind": "completed"}}},
	}, 0, now)
}

func demoTurnTwo(first, now int64) ([]session.Event, error) {
	return demoEvents([]spec{
		{wire.TypeTurnStart, obj{"turn": 2}},
		{wire.TypeStepStart, obj{"turn": 2, "step": 1}},
		{wire.TypeAssistantMessage, obj{"turn": 2, "step": 1, "message": obj{"id": "assistant-2-1", "role": "assistant", "source": demoSource, "content": []any{
			obj{"type": "tool-call", "id": "call-1", "name": "run_tests", "arguments": obj{}},
			obj{"type": "tool-call", "id": "call-2", "name": "read_file", "arguments": obj{"path": "README.md"}},
		}}}},
		{wire.TypeToolCall, obj{"turn": 2, "step": 1, "callId": "call-1", "name": "run_tests", "arguments": "{}"}},
	}, first, now)
}
