package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Sixteen callers append at the end of one session (client.AppendAtEnd)
// while the worker and its persistent dev server are killed with SIGKILL
// and started again: a workflow task whose local group store ran when the
// processes died left no history, and its retry admits the updates in
// another order. Nothing acknowledged is lost or stored twice: every
// acknowledged batch is in the log once, whole, at the seqs its caller was
// told; a batch whose call failed (its outcome unknown to its caller) is
// in the log at most once, whole; nothing else is stored.
func TestAtEndCallersSurviveKill(t *testing.T) {
	const callers = 16
	e := newEnv(t)
	e.startWorker(false)
	e.mustStarter("", "create", "--id", "k1")
	c := e.dialClient(e.ctx)

	type key struct{ caller, round int }
	var (
		mu     sync.Mutex
		acked  = map[key]int64{}
		failed = map[key]bool{}
		sizes  = map[key]int{}
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	for k := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; !stop.Load(); r++ {
				n := 1 + (k+r)%3
				batch := make([]session.Event, n)
				for i := range batch {
					ev, err := session.NewEvent(wire.TypeTodoWrite, int64(i), 1767225600000+int64(r), map[string]any{"text": fmt.Sprintf("caller %d round %d event %d", k, r, i)})
					require.NoError(t, err)
					batch[i] = ev
				}
				ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
				res, err := c.AppendAtEnd(ctx, "k1", session.WireEvents(batch))
				cancel()
				mu.Lock()
				sizes[key{k, r}] = n
				if err != nil {
					failed[key{k, r}] = true
				} else {
					acked[key{k, r}] = res.NextSeq
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	waitAcked := func(n int) {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			mu.Lock()
			got := len(acked)
			mu.Unlock()
			if got >= n {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("fewer than %d batches acknowledged", n)
	}
	waitAcked(100)
	e.kill()
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	e.startWorker(false)
	waitAcked(before + 100)
	// Two writers through the CLI beside the callers: `append --at-end`
	// ignores the input's seqs.
	cli, cliErr := make([]string, 2), make([]error, 2)
	var cwg sync.WaitGroup
	for i := range cli {
		var in string
		for j := range 2 {
			ev, err := session.NewEvent(wire.TypeTodoWrite, 99, 1767225600000, map[string]any{"text": fmt.Sprintf("cli %d event %d", i, j)})
			require.NoError(t, err)
			line, err := ev.MarshalJSON()
			require.NoError(t, err)
			in += string(line) + "\n"
		}
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			cli[i], cliErr[i] = e.starter(in, "append", "--id", "k1", "--at-end")
		}()
	}
	cwg.Wait()
	for _, err := range cliErr {
		require.NoError(t, err, "%s", e.logs())
	}
	stop.Store(true)
	wg.Wait()
	e.mustStarter("", "dispose", "--id", "k1")

	stored := e.stored("k1")
	requireContiguous(t, stored)
	at := map[string]int64{}
	for _, ev := range stored {
		var d struct{ Text string }
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		prev, dup := at[d.Text]
		require.False(t, dup, "%q is stored twice: at %d and %d", d.Text, prev, ev.Seq)
		at[d.Text] = ev.Seq
	}
	owned := make([]bool, len(stored))
	claim := func(k key, first int64, what string) {
		for i := range sizes[k] {
			text := fmt.Sprintf("caller %d round %d event %d", k.caller, k.round, i)
			seq, ok := at[text]
			require.True(t, ok, "%s: %q is not stored", what, text)
			require.Equal(t, first+int64(i), seq, "%s: %q", what, text)
			owned[seq] = true
		}
	}
	keys := make([]key, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return acked[keys[i]] < acked[keys[j]] })
	for _, k := range keys {
		claim(k, acked[k]-int64(sizes[k]), fmt.Sprintf("acknowledged caller %d round %d", k.caller, k.round))
	}
	for i, out := range cli {
		require.Contains(t, out, `appended 2 events to session "k1" in 1 batches`)
		first := at[fmt.Sprintf("cli %d event 0", i)]
		require.Equal(t, first+1, at[fmt.Sprintf("cli %d event 1", i)], "the CLI's batch is whole")
		require.Contains(t, out, fmt.Sprintf("(next seq %d)", first+2))
		owned[first], owned[first+1] = true, true
	}
	landed := 0
	for k := range failed {
		first, ok := at[fmt.Sprintf("caller %d round %d event 0", k.caller, k.round)]
		if !ok {
			continue
		}
		landed++
		claim(k, first, fmt.Sprintf("failed call of caller %d round %d", k.caller, k.round))
	}
	for seq, o := range owned {
		require.True(t, o, "seq %d (%s) is no batch a caller sent", seq, stored[seq].Data)
	}
	t.Logf("%d batches acknowledged, %d calls failed across the kill (%d of them stored), %d events stored", len(acked), len(failed), landed, len(stored))
}
