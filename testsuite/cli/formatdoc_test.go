package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// codeBlock returns the first fenced block of language lang after marker in
// doc.
func codeBlock(t *testing.T, doc, marker, lang string) string {
	t.Helper()
	_, section, ok := strings.Cut(doc, marker)
	require.True(t, ok, "no %q in the document", marker)
	_, block, ok := strings.Cut(section, "\n```"+lang+"\n")
	require.True(t, ok, "no ```%s block after %q", lang, marker)
	block, _, ok = strings.Cut(block, "\n```")
	require.True(t, ok, "the ```%s block is not closed", lang)
	return block
}

// The recipes of docs/FORMAT.md §4.2 for reading a zstd log outside
// sessionflow read every frame: the Node splitter finds the frames of a log
// the store wrote (three appends: four frames), each frame decompressed on
// its own gives the header line and the batches, and the Go recipe's
// reader reads the same lines; both agree with the store's read.
func TestFormatDocReadsEveryZstdFrame(t *testing.T) {
	doc, err := os.ReadFile("../../docs/FORMAT.md")
	require.NoError(t, err)
	recipe := codeBlock(t, string(doc), "**Reading a zstd log outside sessionflow: read every frame.**", "js")
	splitter, _, ok := strings.Cut(recipe, "\nconst log = ")
	require.True(t, ok, "the Node recipe reads no log")

	ctx := context.Background()
	root := t.TempDir()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionZstd})
	require.NoError(t, err)
	h, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: "frames", CreatedAt: 1}, jsonl.CreateOptions{HandleID: "h1"})
	require.NoError(t, err)
	for seq := int64(0); seq < 6; seq += 2 {
		var batch []session.Event
		for i := seq; i < seq+2; i++ {
			e, err := session.NewEvent(wire.TypeTodoWrite, i, 1_700_000_000_000+i, map[string]any{"todos": []any{}, "n": i})
			require.NoError(t, err)
			batch = append(batch, e)
		}
		require.NoError(t, h.Append(ctx, batch))
	}
	require.NoError(t, h.Close(ctx))
	var path string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".jsonl.zstd") {
			path = p
		}
		return err
	}))
	require.NotEmpty(t, path)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)

	// The Node splitter: the frames' byte lengths.
	script := splitter + "\nprocess.stdout.write(JSON.stringify(zstdFrames(require(\"node:fs\").readFileSync(process.argv[1])).map((f) => f.length)));\n"
	out, err := exec.Command("node", "-e", script, path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var lengths []int
	require.NoError(t, json.Unmarshal(out, &lengths), "%s", out)
	require.Len(t, lengths, 4, "the header frame and one frame per append")

	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer dec.Close()
	var plain bytes.Buffer
	at := 0
	for i, n := range lengths {
		frame, err := dec.DecodeAll(raw[at:at+n], nil)
		require.NoError(t, err, "frame %d", i)
		require.Equal(t, byte('\n'), frame[len(frame)-1], "frame %d ends a line", i)
		plain.Write(frame)
		at += n
	}
	require.Equal(t, len(raw), at, "the frames cover the file")

	// The Go recipe.
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r, err := zstd.NewReader(f)
	require.NoError(t, err)
	defer r.Close()
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	require.Equal(t, plain.String(), strings.Join(lines, "\n")+"\n")

	// Both are the store's read: the header line, then the events.
	require.Len(t, lines, 7)
	rh, err := st.Open(ctx, "frames", jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	defer rh.Close(ctx)
	evs, err := rh.Read(ctx, 0, 100)
	require.NoError(t, err)
	require.Len(t, evs, 6)
	for i, e := range evs {
		var got session.Event
		require.NoError(t, json.Unmarshal([]byte(lines[i+1]), &got), lines[i+1])
		require.Equal(t, e.Seq, got.Seq)
		require.JSONEq(t, string(e.Data), string(got.Data))
	}
}
