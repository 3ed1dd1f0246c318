package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// artifactsDir is where the browser tests keep their screenshots:
// $SESSIONFLOW_ARTIFACTS/web, or .artifacts/web at the repository's root.
func artifactsDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("SESSIONFLOW_ARTIFACTS")
	if base == "" {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		require.NoError(t, err)
		base = filepath.Join(root, ".artifacts")
	}
	dir := filepath.Join(base, "web")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// browser starts headless Chromium (Debian's package; .ci/run installs
// it) and returns a context whose actions drive one tab.
func browser(t *testing.T, parent context.Context) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	require.NoError(t, err, "the browser tests need Debian's chromium package (apt-get install chromium)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root, where Chromium's own sandbox cannot start
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(parent, opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// screenshot keeps a full-page screenshot of the tab as name.png in the
// artifacts directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(artifactsDir(t), name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot %s", path)
}

// jsText evaluates a JavaScript expression that yields a string ("" for
// null).
func jsText(ctx context.Context, expr string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("(() => { const v = (%s); return v == null ? '' : String(v); })()", expr)))
}

// waitJS waits until the expression yields a non-empty string, and returns
// it.
func waitJS(t *testing.T, ctx context.Context, what, expr string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	var err error
	for time.Now().Before(deadline) {
		last, err = jsText(ctx, expr)
		if err == nil && last != "" {
			return last
		}
		time.Sleep(30 * time.Millisecond)
	}
	page, _ := jsText(ctx, "document.body.innerText")
	t.Fatalf("the page never showed %s (last error %v); it shows:\n%s", what, err, page)
	return ""
}

// A person opens the web view of a worker started with --http, in a real
// browser: the session list shows the session; on its page they send a
// prompt, see the model's call wait for their approval and approve it with
// the button (the file is written only then, shown as a diff), see the
// answer's tokens arrive while the model streams them, before the message
// is stored, and the turn end with its token usage. A second turn edits
// the file: its call shows the old content against the new.
func TestWebViewRunsATurnInARealBrowser(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	require.NoError(t, os.MkdirAll(project, 0o755))
	const answerText = "Done: notes.txt now holds alpha and beta, written after your approval."
	script, err := json.Marshal(map[string]any{"responses": []any{
		map[string]any{"text": "I will write <b>notes.txt</b><img src=x onerror=\"document.title='owned'\">.", "chunkSize": 4, "delayMs": 20,
			"toolCalls": []any{map[string]any{"id": "w1", "name": "write_file", "arguments": map[string]string{"path": "notes.txt", "content": "alpha\nbeta\n"}}},
			"usage":     map[string]int{"inputTokens": 120, "outputTokens": 30}},
		map[string]any{"text": answerText, "chunkSize": 3, "delayMs": 120,
			"usage": map[string]int{"inputTokens": 207, "outputTokens": 25}},
		// The second turn edits the file the first wrote.
		map[string]any{"text": "I will edit notes.txt.",
			"toolCalls": []any{map[string]any{"id": "w2", "name": "write_file", "arguments": map[string]string{"path": "notes.txt", "content": "zero\nalpha\ngamma\n"}}}},
		map[string]any{"text": "Edited notes.txt."},
	}})
	require.NoError(t, err)
	base := startWebWorker(t, e, dir, script)
	e.mustStarter("", "create", "--id", "web1", "--cwd", project, "--provider", "scripted", "--model", "m1", "--approval-policy", "ask")

	ctx := browser(t, e.ctx)
	// The list.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/")))
	waitJS(t, ctx, "the session in the list", `document.querySelector('[data-testid=session-row][data-id="web1"] a')?.textContent`, 30*time.Second)
	screenshot(t, ctx, "1-sessions")

	// The session: send a prompt.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid=session-row][data-id="web1"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=prompt]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=prompt]`), "Please write notes.txt"),
		chromedp.Click(chromedp.CSS(`[data-testid=send]`)),
	))
	waitJS(t, ctx, "the prompt in the transcript", `[...document.querySelectorAll('[data-testid=user-message]')].map(n => n.innerText).find(s => s.includes('Please write notes.txt'))`, 30*time.Second)

	// The call waits for approval; nothing is written yet.
	waitJS(t, ctx, "the approval", `document.querySelector('[data-testid=approval][data-call="w1"]')?.innerText`, 60*time.Second)
	got := waitJS(t, ctx, "the pending call", `document.querySelector('[data-testid=tool][data-call="w1"] [data-testid=tool-result]')?.innerText`, 10*time.Second)
	require.Equal(t, "running…", got)
	require.Equal(t, "new file notes.txt\n+ alpha\n+ beta",
		waitJS(t, ctx, "the diff", `document.querySelector('[data-testid=tool][data-call="w1"] [data-testid=diff]')?.innerText`, 10*time.Second))
	_, err = os.Stat(filepath.Join(project, "notes.txt"))
	require.True(t, os.IsNotExist(err), "the file was written before it was approved")
	screenshot(t, ctx, "2-approval")

	// Approve: the file is written and the answer streams.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=approval][data-call="w1"] [data-testid=approve]`))))
	partial := waitJS(t, ctx, "the answer's live text", `(() => {
		const live = document.querySelector('[data-testid=live-text] .text')?.textContent || '';
		const stored = [...document.querySelectorAll('[data-testid=assistant-message]')].some(n => n.innerText.includes('Done:'));
		return live.startsWith('Done') && live.length < `+fmt.Sprint(len(answerText))+` && !stored ? live : '';
	})()`, 60*time.Second)
	require.True(t, strings.HasPrefix(answerText, partial), "live text %q is not a prefix of the answer", partial)
	screenshot(t, ctx, "3-streaming")

	// The turn ends: the stored answer replaces the live text, the call
	// shows its result, the model calls their usage.
	waitJS(t, ctx, "the turn's end", `document.querySelector('[data-testid=turn-end]')?.innerText`, 60*time.Second)
	msgs := waitJS(t, ctx, "the answer", `[...document.querySelectorAll('[data-testid=assistant-message]')].map(n => n.innerText).join('\n---\n')`, 10*time.Second)
	require.Contains(t, msgs, answerText)
	require.Contains(t, msgs, "tokens: in 207 · out 25")
	require.Contains(t, msgs, "tokens: in 120 · out 30")
	result := waitJS(t, ctx, "the call's result", `(() => { const r = document.querySelector('[data-testid=tool][data-call="w1"] [data-testid=tool-result]'); return r && !r.classList.contains('pending') && !r.classList.contains('error') ? r.innerText : ''; })()`, 10*time.Second)
	require.NotEqual(t, "running…", result)
	live, err := jsText(ctx, `document.querySelector('[data-testid=live-text]')?.innerText`)
	require.NoError(t, err)
	require.Empty(t, live, "the live text stayed after the message was stored")
	require.Equal(t, "turn 1 ended: completed", waitJS(t, ctx, "the turn's end", `document.querySelector('[data-testid=turn-end]')?.innerText`, time.Second))
	screenshot(t, ctx, "4-done")

	// The model's markup is shown as text, never run as the page's.
	require.Contains(t, msgs, `I will write <b>notes.txt</b><img src=x onerror="document.title='owned'">.`)
	n, err := jsText(ctx, `document.querySelectorAll('[data-testid=transcript] b, [data-testid=transcript] img').length`)
	require.NoError(t, err)
	require.Equal(t, "0", n)
	title, err := jsText(ctx, `document.title`)
	require.NoError(t, err)
	require.Equal(t, "sessionflow", title)

	b, err := os.ReadFile(filepath.Join(project, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "alpha\nbeta\n", string(b))

	// A second turn edits the file: its call shows the old content against
	// the new, line for line, each line marked removed, added or kept.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`[data-testid=prompt]`), "Please edit notes.txt"),
		chromedp.Click(chromedp.CSS(`[data-testid=send]`)),
	))
	waitJS(t, ctx, "the edit's approval", `document.querySelector('[data-testid=approval][data-call="w2"]')?.innerText`, 60*time.Second)
	const editDiff = `[...document.querySelectorAll('[data-testid=tool][data-call="w2"] [data-testid=diff] .line')].map(n => n.className + ' | ' + n.textContent).join('\n')`
	require.Equal(t, strings.Join([]string{
		"line ctx | notes.txt",
		"line add | + zero",
		"line ctx |   alpha",
		"line del | - beta",
		"line add | + gamma",
	}, "\n"), waitJS(t, ctx, "the edit's diff", editDiff, 10*time.Second))
	require.Equal(t, "notes.txt\n+ zero\n  alpha\n- beta\n+ gamma",
		waitJS(t, ctx, "the edit's diff as shown", `document.querySelector('[data-testid=tool][data-call="w2"] [data-testid=diff]')?.innerText`, time.Second))
	b, err = os.ReadFile(filepath.Join(project, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "alpha\nbeta\n", string(b), "the file was edited before the edit was approved")
	screenshot(t, ctx, "5-edit-diff")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=approval][data-call="w2"] [data-testid=approve]`))))
	waitJS(t, ctx, "the second turn's end", `[...document.querySelectorAll('[data-testid=turn-end]')].map(n => n.innerText).find(s => s === 'turn 2 ended: completed')`, 60*time.Second)
	b, err = os.ReadFile(filepath.Join(project, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "zero\nalpha\ngamma\n", string(b))
	e.mustStarter("", "dispose", "--id", "web1")
}

// The web view shows the lineage: a subagent call's child and a fork sit
// below their parent in the list, marked as such; a child's page links
// its parent.
func TestWebViewShowsTheLineage(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	script, err := json.Marshal(map[string]any{
		"responses": []any{
			map[string]any{"toolCalls": []any{map[string]any{"id": "d1", "name": "subagent", "arguments": `{"description":"Count files","prompt":"TASK-L: count the files"}`}}},
			map[string]any{"text": "The child counted."},
		},
		"branches": []any{map[string]any{"when": "TASK-L", "responses": []any{map[string]any{"text": "Three files."}}}},
	})
	require.NoError(t, err)
	base := startWebWorker(t, e, dir, script)
	e.mustStarter("", "create", "--id", "tree-root", "--cwd", dir, "--provider", "scripted", "--model", "m1")
	require.Contains(t, e.mustStarter("", "turn", "--id", "tree-root", "--prompt", "delegate the count", "--root", e.root), "The child counted.")
	e.mustStarter("", "fork", "--id", "tree-root", "--at-turn", "1", "--new-id", "tree-fork")

	ctx := browser(t, e.ctx)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/")))
	rows := `[...document.querySelectorAll('[data-testid=session-row]')].map(r => r.dataset.depth + ' ' + r.querySelector('td').innerText.trim()).join('\n')`
	got := waitJS(t, ctx, "three sessions in the list", `(() => { const s = `+rows+`; return s.split('\n').length === 3 ? s : ''; })()`, 30*time.Second)
	lines := strings.Split(got, "\n")
	require.Equal(t, "0 tree-root", lines[0])
	require.ElementsMatch(t, []string{"1 ↳ fork tree-fork", "1 ↳ subagent " + childOf(t, base, "tree-root")}, lines[1:])
	screenshot(t, ctx, "6-lineage")

	child := childOf(t, base, "tree-root")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/#/s/"+child)))
	require.Equal(t, "tree-root", waitJS(t, ctx, "the parent link", `document.querySelector('[data-testid=parent-link]')?.textContent`, 30*time.Second))
}

// childOf returns the child session that parent's subagent call started,
// as the HTTP API at base lists it.
func childOf(t *testing.T, base, parent string) string {
	t.Helper()
	r, err := http.Get(base + "/v1/sessions")
	require.NoError(t, err)
	defer r.Body.Close()
	var list struct {
		Sessions []struct {
			ID, ParentSession, Origin string
			DelegationDepth           int64
		} `json:"sessions"`
	}
	require.NoError(t, json.NewDecoder(r.Body).Decode(&list))
	for _, s := range list.Sessions {
		if s.ParentSession == parent && s.Origin == "subagent" {
			require.Equal(t, int64(1), s.DelegationDepth)
			return s.ID
		}
	}
	t.Fatalf("no subagent child of %s in the list", parent)
	return ""
}

// startWebWorker writes script into dir, starts `worker --dev` with it as
// its provider script and the HTTP API on a free loopback port, waits for
// the API to answer and returns its base URL.
func startWebWorker(t *testing.T, e *env, dir string, script []byte) string {
	t.Helper()
	scriptPath := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(scriptPath, script, 0o644))
	httpPort := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	e.workerArgs = []string{"--provider-script", scriptPath, "--http", fmt.Sprintf("127.0.0.1:%d", httpPort)}
	e.startWorker(true)
	require.Eventually(t, func() bool {
		r, err := http.Get(base + "/v1/sessions")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the worker's HTTP server never answered:\n%s", e.logs())
	return base
}
