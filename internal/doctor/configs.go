package doctor

// This file is the part of doctor that reads the assistants'
// MCP configurations where each keeps them (Claude Desktop, Claude Code,
// Cursor, VS Code), finds the entries that start poppy-mcp, and checks that
// each command exists and that `serve` accepts its flags (with serve's own
// parser). The environment variables an entry sets are named, never shown:
// their values are secrets (POPPY_STATE_KEY, POPPY_HTTP_TOKEN).

import (
	"encoding/json"
	"errors"
	"github.com/poppy-mcp/poppy-mcp/internal/localfile"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// The dialects the assistants read their configurations in.
const (
	// DialectJSON is strict JSON (RFC 8259): Claude Desktop, Claude Code
	// and Cursor parse their files with JSON.parse, which refuses comments
	// and trailing commas.
	DialectJSON = "JSON"
	// DialectJSONC is VS Code's JSON with comments: // and /* */ comments
	// and trailing commas are accepted.
	DialectJSONC = "JSONC"
)

// configPlace is where one assistant keeps MCP servers.
type configPlace struct {
	App     string
	Path    string
	Dialect string // DialectJSON or DialectJSONC
	// servers finds the servers objects of the parsed file, by where they
	// are in it ("" for the file's own).
	servers func(doc map[string]json.RawMessage) map[string]json.RawMessage
}

// configEntry is one MCP server of a configuration, in the shapes the
// assistants use.
type configEntry struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
}

// ConfigReport is what doctor found in one file.
type ConfigReport struct {
	App     string        `json:"app"`
	Path    string        `json:"path"`
	Dialect string        `json:"dialect"` // what the assistant reads it as: JSON or JSONC
	Status  string        `json:"status"`
	Message string        `json:"message,omitempty"`
	Entries []EntryReport `json:"entries"`
}

// EntryReport is one poppy-mcp entry.
type EntryReport struct {
	Name    string `json:"name"`
	Where   string `json:"where,omitempty"` // Claude Code: the project it is for
	Status  string `json:"status"`
	Message string `json:"message"`
	// Env names the variables the entry sets; their values are not read out.
	Env []string `json:"env"`
}

// configPlaces are the usual places of the assistants' configurations,
// under home and in the project directory cwd.
func configPlaces(home, cwd string) []configPlace {
	key := func(k string) func(map[string]json.RawMessage) map[string]json.RawMessage {
		return func(doc map[string]json.RawMessage) map[string]json.RawMessage {
			return map[string]json.RawMessage{"": doc[k]}
		}
	}
	appData := UserConfigDir(home)
	return []configPlace{
		{"Claude Desktop", filepath.Join(appData, "Claude", "claude_desktop_config.json"), DialectJSON, key("mcpServers")},
		{"Claude Code", filepath.Join(home, ".claude.json"), DialectJSON, claudeCodeServers},
		{"Claude Code", filepath.Join(cwd, ".mcp.json"), DialectJSON, key("mcpServers")},
		{"Cursor", filepath.Join(home, ".cursor", "mcp.json"), DialectJSON, key("mcpServers")},
		{"Cursor", filepath.Join(cwd, ".cursor", "mcp.json"), DialectJSON, key("mcpServers")},
		{"VS Code", filepath.Join(cwd, ".vscode", "mcp.json"), DialectJSONC, key("servers")},
		{"VS Code", filepath.Join(appData, "Code", "User", "mcp.json"), DialectJSONC, key("servers")},
		{"VS Code", filepath.Join(appData, "Code", "User", "settings.json"), DialectJSONC, vsCodeSettingsServers},
	}
}

// UserConfigDir is where applications keep their settings for the user:
// ~/Library/Application Support on macOS, %APPDATA% on Windows, else
// $XDG_CONFIG_HOME or ~/.config. It goes by home rather than
// os.UserConfigDir, so that tests can set HOME.
func UserConfigDir(home string) string {
	switch runtime.GOOS {
	case "darwin":
		return filepath.Join(home, "Library", "Application Support")
	case "windows":
		if d := os.Getenv("APPDATA"); d != "" {
			return d
		}
		return filepath.Join(home, "AppData", "Roaming")
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return d
	}
	return filepath.Join(home, ".config")
}

// claudeCodeServers are ~/.claude.json's user servers and each project's.
func claudeCodeServers(doc map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{"": doc["mcpServers"]}
	var projects map[string]struct {
		MCPServers json.RawMessage `json:"mcpServers"`
	}
	_ = json.Unmarshal(doc["projects"], &projects)
	for dir, p := range projects {
		out["project "+dir] = p.MCPServers
	}
	return out
}

// vsCodeSettingsServers are the servers of VS Code's user settings, under "mcp".
func vsCodeSettingsServers(doc map[string]json.RawMessage) map[string]json.RawMessage {
	var mcp struct {
		Servers json.RawMessage `json:"servers"`
	}
	_ = json.Unmarshal(doc["mcp"], &mcp)
	return map[string]json.RawMessage{"": mcp.Servers}
}

// checkConfigs reads every configuration that exists, each bounded in
// size and time and only when it is a regular file (internal/localfile): a
// project's .mcp.json linked to /dev/zero is reported, not read.
func checkConfigs(home, cwd string, serve func([]string) error) []ConfigReport {
	out := []ConfigReport{}
	for _, pl := range configPlaces(home, cwd) {
		b, err := localfile.Read(pl.Path, localfile.MaxConfigFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		out = append(out, checkConfigFile(pl, b, err, serve))
	}
	return out
}

// checkConfigFile checks one configuration file's poppy-mcp entries.
func checkConfigFile(pl configPlace, b []byte, readErr error, serve func([]string) error) ConfigReport {
	rep := ConfigReport{App: pl.App, Path: pl.Path, Dialect: pl.Dialect, Status: StatusOK, Entries: []EntryReport{}}
	var large *localfile.TooLargeError
	switch {
	case errors.As(readErr, &large) || errors.Is(readErr, localfile.ErrTooSlow):
		// The assistant may read it all the same: doctor only could not check it.
		rep.Status, rep.Message = StatusWarn, "not checked: "+readErr.Error()
		return rep
	case readErr != nil:
		rep.Status, rep.Message = StatusError, "cannot be read: "+strings.TrimPrefix(readErr.Error(), "open "+pl.Path+": ")
		return rep
	}
	doc, msg := parseConfig(pl, b)
	if doc == nil {
		rep.Status, rep.Message = StatusError, msg
		return rep
	}
	rep.Entries = checkEntries(pl, doc, serve)
	rep.Status = StatusInfo // no entry, or only HTTP ones
	for _, e := range rep.Entries {
		if e.Status != StatusInfo {
			rep.Status = worse(rep.Status, e.Status)
		}
	}
	if len(rep.Entries) == 0 {
		rep.Message = "no poppy-mcp entry"
	}
	return rep
}

// checkEntries checks the poppy-mcp entries of a parsed configuration.
func checkEntries(pl configPlace, doc map[string]json.RawMessage, serve func([]string) error) []EntryReport {
	out := []EntryReport{}
	places := pl.servers(doc)
	for _, where := range slices.Sorted(maps.Keys(places)) {
		var entries map[string]configEntry
		_ = json.Unmarshal(places[where], &entries)
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			if e, ok := checkEntry(pl.App, name, entries[name], serve); ok {
				e.Where = where
				out = append(out, e)
			}
		}
	}
	return out
}

// parseConfig parses a configuration in its assistant's dialect. A nil
// document comes with what is wrong, phrased for the person: a file with
// comments or trailing commas where the assistant reads strict JSON is as
// broken for it as one that is no JSON at all.
func parseConfig(pl configPlace, b []byte) (map[string]json.RawMessage, string) {
	var doc map[string]json.RawMessage
	if pl.Dialect == DialectJSONC {
		if json.Unmarshal(stripJSONC(b), &doc) != nil || doc == nil {
			return nil, "is not JSON with comments (JSONC, as " + pl.App + " reads it): " + pl.App + " cannot read it either"
		}
		return doc, ""
	}
	if json.Unmarshal(b, &doc) == nil && doc != nil {
		return doc, ""
	}
	if json.Unmarshal(stripJSONC(b), &doc) == nil && doc != nil {
		return nil, "has comments or trailing commas, which " + pl.App + " refuses: it reads strict JSON; remove them"
	}
	return nil, "is not JSON (" + pl.App + " reads strict JSON): " + pl.App + " cannot read it either"
}

// worse is the more serious of two status words.
func worse(a, b string) string {
	rank := map[string]int{StatusInfo: 0, StatusSkip: 0, StatusOK: 1, StatusWarn: 2, StatusError: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// checkEntry checks one server entry; ok is false for an entry that does
// not start poppy-mcp.
func checkEntry(app, name string, e configEntry, serve func([]string) error) (EntryReport, bool) {
	rep := EntryReport{Name: name, Env: slices.Sorted(maps.Keys(e.Env))}
	if rep.Env == nil {
		rep.Env = []string{}
	}
	base := strings.TrimSuffix(filepath.Base(e.Command), ".exe")
	switch {
	case e.Command == "" && e.URL != "" && strings.Contains(strings.ToLower(name), "poppy"):
		rep.Status, rep.Message = StatusInfo, "connects over HTTP to "+e.URL+": doctor does not check a running serve --http"
		return rep, true
	case base != "poppy-mcp":
		return rep, false
	}
	rep.Status, rep.Message = checkCommand(app, e, serve)
	if unknown := unknownVariables(rep.Env); len(unknown) > 0 {
		rep.Status = worse(rep.Status, StatusWarn)
		rep.Message += "; sets " + strings.Join(unknown, ", ") + ", which poppy-mcp does not read"
	}
	return rep, true
}

// checkCommand checks that an entry's command exists and that serve
// accepts its arguments.
func checkCommand(app string, e configEntry, serve func([]string) error) (status, message string) {
	path, err := commandPath(e.Command)
	if err != nil {
		return StatusError, err.Error()
	}
	args := e.Args
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	} else if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return StatusError, "runs `poppy-mcp " + args[0] + "`: an assistant needs `poppy-mcp serve`"
	}
	if err := serve(args); err != nil {
		return StatusError, "serve does not accept its arguments " + quote(e.Args) + ": " + err.Error()
	}
	status, message = StatusOK, "runs "+path+" "+strings.Join(e.Args, " ")
	if app == "Claude Desktop" && !filepath.IsAbs(e.Command) && runtime.GOOS == "darwin" {
		status = StatusWarn
		message += "; Claude Desktop starts servers with a shorter PATH than a shell's: give the full path, " + path
	}
	return status, message
}

// commandPath finds the command an entry starts, as the assistant would:
// a path as it is, a bare name on PATH.
func commandPath(cmd string) (string, error) {
	if strings.ContainsRune(cmd, os.PathSeparator) || strings.ContainsRune(cmd, '/') {
		fi, err := os.Stat(cmd)
		switch {
		case err != nil:
			return "", errors.New("its command " + cmd + " does not exist")
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0 && runtime.GOOS != "windows":
			return "", errors.New("its command " + cmd + " is not an executable file")
		}
		return cmd, nil
	}
	path, err := exec.LookPath(cmd)
	if err != nil {
		return "", errors.New("its command " + cmd + " is not on PATH: give its full path (`go install` puts it in $(go env GOPATH)/bin)")
	}
	return path, nil
}

// knownVariables are the environment variables poppy-mcp reads that an
// assistant's entry may set.
var knownVariables = []string{"POPPY_CLIENT_ID", "POPPY_STATE_KEY", "POPPY_HTTP_TOKEN", "POPPY_STORE", "POPPY_AUTH_CLIENT_SECRET"}

// unknownVariables are the POPPY_ variables of names that poppy-mcp does not read.
func unknownVariables(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "POPPY_") && !slices.Contains(knownVariables, n) {
			out = append(out, n)
		}
	}
	return out
}

// stripJSONC turns JSON with comments and trailing commas (VS Code's
// settings.json, JSONC) into JSON: comments outside strings become spaces
// (so offsets stay), and a comma before a closing bracket or brace goes.
// JSON comes back unchanged.
func stripJSONC(b []byte) []byte {
	out := make([]byte, 0, len(b))
	lastComma := -1 // index in out of a comma not yet followed by a value
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			j := endOfString(b, i)
			out = append(out, b[i:j]...)
			i, lastComma = j-1, -1
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				out, i = append(out, ' '), i+1
			}
			i--
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := strings.Index(string(b[i+2:]), "*/")
			n := len(b) - i
			if end >= 0 {
				n = end + 4
			}
			out = append(out, []byte(strings.Repeat(" ", n))...)
			i += n - 1
		case (c == '}' || c == ']') && lastComma >= 0:
			out[lastComma] = ' '
			out, lastComma = append(out, c), -1
		case c == ',':
			out, lastComma = append(out, c), len(out)
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			out = append(out, c)
		default:
			out, lastComma = append(out, c), -1
		}
	}
	return out
}

// endOfString returns the index just past the JSON string that starts at
// b[i], or len(b) for one left open.
func endOfString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// quote quotes a configuration's arguments for a sentence.
func quote(args []string) string {
	b, _ := json.Marshal(args)
	return string(b)
}
