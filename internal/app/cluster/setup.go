package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sessionflow/sessionflow/deploy"
	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/toolbuild"
)

// Namespace is the namespace the cluster's setup registers and its workers
// serve, the compose stack's.
const Namespace = "default"

// NamespaceRetention is the retention of Namespace, the compose stack's.
const NamespaceRetention = "72h"

// SearchAttributesEnv returns sessionflow's search attributes in the form
// of the namespace job's SEARCH_ATTRIBUTES ("Name=Type ..."), sorted by
// name: the value the launcher gives deploy's create-namespace.sh, and the
// one the compose stack must set.
func SearchAttributesEnv() string {
	var pairs []string
	for name, typ := range devserver.SearchAttributes() {
		pairs = append(pairs, name+"="+searchAttributeType(typ))
	}
	slices.Sort(pairs)
	return strings.Join(pairs, " ")
}

// searchAttributeType is the `temporal operator search-attribute create
// --type` spelling of t.
func searchAttributeType(t enumspb.IndexedValueType) string {
	switch t {
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
		return "Keyword"
	case enumspb.INDEXED_VALUE_TYPE_TEXT:
		return "Text"
	case enumspb.INDEXED_VALUE_TYPE_INT:
		return "Int"
	case enumspb.INDEXED_VALUE_TYPE_DOUBLE:
		return "Double"
	case enumspb.INDEXED_VALUE_TYPE_BOOL:
		return "Bool"
	case enumspb.INDEXED_VALUE_TYPE_DATETIME:
		return "Datetime"
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		return "KeywordList"
	}
	return t.String()
}

// toolPath links the binaries the setup scripts call by name (temporal-sql-tool,
// temporal) into dir and returns a PATH with dir first.
func toolPath(dir string, links map[string]string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, target := range links {
		link := filepath.Join(dir, name)
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return "", fmt.Errorf("linking %s: %w", name, err)
		}
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH"), nil
}

// runScript runs one of deploy's setup scripts (written under root) with sh
// and the given environment added, its output appended to logPath.
func runScript(ctx context.Context, root, script, logPath string, env []string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(root, filepath.FromSlash(script)))
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = root
	cmd.Stdout = io.MultiWriter(logf, &out)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", script, err, toolbuild.Tail(out.Bytes(), 4096))
	}
	return nil
}

// setupSchema runs deploy's setup-schema.sh against the database at pgPort,
// as the compose stack's temporal-admin-tools job does.
func setupSchema(ctx context.Context, root, path string, pgPort int, logPath string) error {
	return runScript(ctx, root, deploy.SetupSchemaScript, logPath, []string{
		"PATH=" + path,
		"SQL_PLUGIN=postgres12",
		"SQL_HOST=127.0.0.1",
		"SQL_PORT=" + strconv.Itoa(pgPort),
		"SQL_USER=" + dbUser,
		"SQL_PASSWORD=" + dbPassword,
		"TEMPORAL_DB=temporal",
		"TEMPORAL_VISIBILITY_DB=temporal_visibility",
	})
}

// createNamespace runs deploy's create-namespace.sh against the frontend at
// address, as the compose stack's temporal-create-namespace job does.
func createNamespace(ctx context.Context, root, path, address, logPath string) error {
	return runScript(ctx, root, deploy.CreateNamespaceScript, logPath, []string{
		"PATH=" + path,
		"TEMPORAL_ADDRESS=" + address,
		"NAMESPACE=" + Namespace,
		"NAMESPACE_RETENTION=" + NamespaceRetention,
		"SEARCH_ATTRIBUTES=" + SearchAttributesEnv(),
	})
}
