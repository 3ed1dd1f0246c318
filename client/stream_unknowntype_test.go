package client

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
)

// An event type this build does not know, and that is not marked
// ignorable, is refused before its batch is sent, as `starter log append`
// refuses it; an ignorable one is sent.
func TestAppendStreamRefusesUnknownEventType(t *testing.T) {
	valid := toJSONL(t, testEvents(t, 0, 2, 10))
	unknown := `{"type":"future/thing","seq":2,"time":12,"data":{}}` + "\n"
	a := &recordingAppender{}
	res, err := appendStream(context.Background(), a, "s1", strings.NewReader(valid+unknown), session.ParseAppendLineWire, 1<<20, 100, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.EqualError(t, err, `line 3: not a valid event: type "future/thing" is unknown to this build and not marked ignorable`)
	require.Empty(t, a.batches, "nothing of the batch holding the line is sent")
	require.Zero(t, res.Events)

	ignorable := `{"type":"future/thing","seq":2,"time":12,"data":{"k":1},"ignorable":true}` + "\n"
	a = &recordingAppender{}
	res, err = appendStream(context.Background(), a, "s1", strings.NewReader(valid+ignorable), session.ParseAppendLineWire, 1<<20, 100, nil)
	require.NoError(t, err)
	require.Len(t, a.batches, 1)
	require.Len(t, a.batches[0], 3)
	require.Equal(t, "future/thing", string(a.batches[0][2].Type))
	require.Equal(t, int64(3), res.Events)
}
