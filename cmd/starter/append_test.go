package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func TestAppendSample(t *testing.T) {
	sample := string(readFile(t, "../../testdata/sample.jsonl"))
	events := decodeEvents(t, strings.Split(strings.TrimSuffix(sample, "\n"), "\n"))
	require.Equal(t, jsonlOf(t, events...), sample, "the sample is in canonical form")
	for i, e := range events {
		require.Equal(t, int64(i), e.Seq)
		require.NoError(t, e.Validate())
	}
	_, open, err := session.ScanOpenTurn(events)
	require.NoError(t, err)
	require.False(t, open, "the sample ends on a turn boundary")
	require.Equal(t, int64(2), session.LastTurn(events))

	for _, comp := range compressions {
		for _, batch := range []string{"256", "5", "1"} {
			t.Run(comp+"/batch="+batch, func(t *testing.T) {
				root := t.TempDir()
				mustOK(t, logCmd(t, root, comp, "", "create", "--id", "demo"))
				r := mustOK(t, logCmd(t, root, comp, sample, "append", "--id", "demo", "--batch", batch))
				require.Equal(t, fmt.Sprintf("appended %d events to session \"demo\"\n", len(events)), r.stdout)
				require.Nil(t, leaseOf(t, root, comp, "demo"), "append must release its lease")
				lines := catLines(t, root, comp, "demo")
				require.Equal(t, sample, strings.Join(lines[1:], "\n")+"\n")
				if comp == "none" {
					raw := string(readFile(t, logPath(t, root, comp, "demo")))
					require.Equal(t, lines[0]+"\n"+sample, raw)
				}
			})
		}
	}
}

func TestAppendSkipsBlankLinesAndContinues(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			mustOK(t, logCmd(t, root, comp, "", "create", "--id", "s"))
			first := jsonlOf(t, ev(t, wire.TypeTurnStart, 0, 10, `{"turn":1}`))
			r := mustOK(t, logCmd(t, root, comp, "\n  \n"+first+"\r\n\n", "append", "--id", "s"))
			require.Equal(t, "appended 1 events to session \"s\"\n", r.stdout)
			// No trailing newline on the last line, and a second invocation
			// continues the seqs.
			second := strings.TrimSuffix(jsonlOf(t, ev(t, wire.TypeTurnEnd, 1, 11, `{"turn":1,"reason":{"kind":"completed"}}`)), "\n")
			mustOK(t, logCmd(t, root, comp, second, "append", "--id", "s"))
			r = mustOK(t, logCmd(t, root, comp, "", "append", "--id", "s"))
			require.Equal(t, "appended 0 events to session \"s\"\n", r.stdout)
			require.Equal(t, []string{strings.TrimSuffix(first, "\n"), second}, catLines(t, root, comp, "s")[1:])
		})
	}
}

func TestAppendInvalidLineWritesNothingOfItsBatch(t *testing.T) {
	valid := func(t *testing.T) string {
		return jsonlOf(t,
			ev(t, wire.TypeTurnStart, 0, 10, `{"turn":1}`),
			ev(t, wire.TypeStepStart, 1, 11, `{"turn":1,"step":1}`))
	}
	cases := []struct {
		name string
		line string
		want string
	}{
		{"not json", `{"type":"step/end","seq":2,`, "stdin line 4: not a valid event"},
		{"data missing", `{"type":"step/start","seq":2,"time":12}`, "stdin line 4: not a valid event"},
		{"unknown key", `{"type":"step/end","seq":2,"time":12,"data":{},"extra":1}`, "stdin line 4: not a valid event"},
		{"surfaceOp on a log-only type", `{"type":"step/end","seq":2,"time":12,"data":{},"surfaceOp":"append"}`, "stdin line 4: not a valid event"},
		{"unknown type", `{"type":"future/thing","seq":2,"time":12,"data":{}}`, `stdin line 4: not a valid event: type "future/thing" is unknown to this build and not marked ignorable`},
	}
	for _, comp := range compressions {
		for _, c := range cases {
			t.Run(comp+"/"+c.name, func(t *testing.T) {
				root := t.TempDir()
				mustOK(t, logCmd(t, root, comp, "", "create", "--id", "s"))
				path := logPath(t, root, comp, "s")
				before := readFile(t, path)
				in := valid(t) + "\n" + c.line + "\n"
				r := logCmd(t, root, comp, in, "append", "--id", "s")
				mustFail(t, r, 1, c.want)
				require.NotContains(t, r.stderr, "earlier batches")
				require.Equal(t, before, readFile(t, path), "nothing of the batch is written")
				require.Nil(t, leaseOf(t, root, comp, "s"), "a failed append releases its lease")

				// With one event per batch, the lines before the bad one are
				// already durable and the error says so.
				r = logCmd(t, root, comp, in, "append", "--id", "s", "--batch", "1")
				mustFail(t, r, 1, c.want)
				require.Contains(t, r.stderr, "(2 events from earlier batches were appended)")
				require.Len(t, catLines(t, root, comp, "s"), 3)
			})
		}
	}

	t.Run("an ignorable unknown type is accepted", func(t *testing.T) {
		root := t.TempDir()
		mustOK(t, logCmd(t, root, "none", "", "create", "--id", "s"))
		line := `{"type":"future/thing","seq":0,"time":1,"data":{"k":1},"ignorable":true}`
		mustOK(t, logCmd(t, root, "none", line+"\n", "append", "--id", "s"))
		require.Equal(t, line, catLines(t, root, "none", "s")[1])
	})
}

func TestAppendSeqMismatch(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			mustOK(t, logCmd(t, root, comp, "", "create", "--id", "s"))
			path := logPath(t, root, comp, "s")
			before := readFile(t, path)

			r := logCmd(t, root, comp, jsonlOf(t, ev(t, wire.TypeTurnStart, 1, 10, `{"turn":1}`)), "append", "--id", "s")
			mustFail(t, r, 1, `append seq mismatch for "s": expected 0 at index 0, got 1`)
			require.Equal(t, before, readFile(t, path))

			mustOK(t, logCmd(t, root, comp, jsonlOf(t,
				ev(t, wire.TypeTurnStart, 0, 10, `{"turn":1}`),
				ev(t, wire.TypeStepStart, 1, 11, `{"turn":1,"step":1}`)), "append", "--id", "s"))
			r = logCmd(t, root, comp, jsonlOf(t,
				ev(t, wire.TypeStepEnd, 2, 12, `{"turn":1,"step":1}`),
				ev(t, wire.TypeTurnEnd, 4, 13, `{"turn":1,"reason":{"kind":"completed"}}`)), "append", "--id", "s")
			mustFail(t, r, 1, `append seq mismatch for "s": expected 3 at index 1, got 4`)
			require.Len(t, catLines(t, root, comp, "s"), 3, "the mismatching batch is refused whole")
			mustFail(t, logCmd(t, root, comp, "", "append", "--id", "missing"), 1, `session "missing" not found`)
		})
	}
}

// recordingAppender records the batches appendStream hands over.
type recordingAppender struct {
	batches [][]session.Event
	failAt  int // 1-based batch that fails; 0 = never
}

func (r *recordingAppender) Append(_ context.Context, events []session.Event) error {
	if r.failAt == len(r.batches)+1 {
		return errors.New("disk full")
	}
	r.batches = append(r.batches, session.CloneEvents(events))
	return nil
}

func TestAppendStreamBatchBounds(t *testing.T) {
	var in strings.Builder
	for i := range 10 {
		in.WriteString(jsonlOf(t, ev(t, wire.TypeTodoWrite, int64(i), 1, `{"i":1}`)))
	}
	rec := &recordingAppender{}
	n, err := appendStream(context.Background(), rec, strings.NewReader(in.String()), 4)
	require.NoError(t, err)
	require.Equal(t, int64(10), n)
	require.Len(t, rec.batches, 3)
	require.Equal(t, []int{4, 4, 2}, []int{len(rec.batches[0]), len(rec.batches[1]), len(rec.batches[2])})
	require.Equal(t, int64(4), rec.batches[1][0].Seq)

	// Byte bound: 300 KiB payloads, at most 1 MiB of encoded events per batch.
	big := strings.Repeat("x", 300<<10)
	in.Reset()
	for i := range 7 {
		in.WriteString(jsonlOf(t, ev(t, wire.TypeTodoWrite, int64(i), 1, `{"text":"`+big+`"}`)))
	}
	rec = &recordingAppender{}
	n, err = appendStream(context.Background(), rec, strings.NewReader(in.String()), 256)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	var sizes []int
	for _, b := range rec.batches {
		sizes = append(sizes, len(b))
		total := 0
		for _, e := range b {
			enc, err := e.MarshalJSON()
			require.NoError(t, err)
			total += len(enc) + 1
		}
		require.LessOrEqual(t, total, maxAppendBatchSize)
	}
	require.Equal(t, []int{3, 3, 1}, sizes)

	// A single event larger than the bound still goes, alone.
	huge := strings.Repeat("y", 2<<20)
	in.Reset()
	in.WriteString(jsonlOf(t, ev(t, wire.TypeTodoWrite, 0, 1, `{"i":0}`)))
	in.WriteString(jsonlOf(t, ev(t, wire.TypeTodoWrite, 1, 1, `{"text":"`+huge+`"}`)))
	in.WriteString(jsonlOf(t, ev(t, wire.TypeTodoWrite, 2, 1, `{"i":2}`)))
	rec = &recordingAppender{}
	_, err = appendStream(context.Background(), rec, strings.NewReader(in.String()), 256)
	require.NoError(t, err)
	require.Equal(t, []int{1, 1, 1}, []int{len(rec.batches[0]), len(rec.batches[1]), len(rec.batches[2])})

	// A failing batch stops the stream and reports what was appended.
	in.Reset()
	for i := range 5 {
		in.WriteString(jsonlOf(t, ev(t, wire.TypeTodoWrite, int64(i), 1, `{}`)))
	}
	rec = &recordingAppender{failAt: 2}
	n, err = appendStream(context.Background(), rec, strings.NewReader(in.String()), 2)
	require.EqualError(t, err, "disk full")
	require.Equal(t, int64(2), n)
}

func TestAppendStreamReadError(t *testing.T) {
	rec := &recordingAppender{}
	r := &failingReader{data: jsonlOf(t, ev(t, wire.TypeTodoWrite, 0, 1, `{}`)), err: os.ErrClosed}
	n, err := appendStream(context.Background(), rec, r, 256)
	require.ErrorIs(t, err, os.ErrClosed)
	require.Contains(t, err.Error(), "read stdin")
	require.Zero(t, n)
	require.Empty(t, rec.batches, "a batch cut short by a read error is not written")
}

// failingReader returns data, then err.
type failingReader struct {
	data string
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}
