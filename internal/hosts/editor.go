package hosts

// Server is one MCP server entry as a host's config file holds it, decoded.
type Server struct {
	Name string
	// Command and Args are the program and its arguments (for a host whose
	// command is an array, its first element and the rest).
	Command string
	Args    []string
	// Remote servers (url, httpUrl, serverUrl, uri, or a type such as
	// http, sse, streamable-http, streamableHttp, streamable_http, ws,
	// remote) are never wrapped.
	Remote bool
	// NoCommand marks entries without a process to wrap (a Zed extension
	// server, a goose builtin).
	NoCommand bool
}

// Schema says where a host keeps its servers in a file and what their
// fields are called.
type Schema struct {
	// Path is the chain of keys from the document root to the servers
	// (e.g. ["mcpServers"], ["projects", "/abs/dir", "mcpServers"],
	// ["mcp_servers"], ["extensions"], ["context_servers"], ["mcp"]).
	Path []string
	// List: the servers are a list of objects named by a "name" field
	// (Continue), not a map keyed by name.
	List bool
	// Command is the command field: "command", or "cmd" (goose).
	Command string
	// Args is the arguments field ("args"); empty when Command is an
	// array holding the program and its arguments (opencode).
	Args string
}

// Editor edits the MCP servers of one file format surgically: every byte
// that is not part of an edited value stays as it was (comments, trailing
// commas, key order, indentation, quoting of untouched values).
//
// Wrap and Unwrap move raw text, they do not re-render it: Wrap replaces the
// command's value with exe and inserts prefix (rendered as new strings in
// the style of the neighbouring elements) followed by the old command's own
// text in front of the arguments; Unwrap removes everything up to and
// including the element "--" and moves the element after it back into the
// command field verbatim. So Unwrap(Wrap(src)) == src byte for byte.
type Editor interface {
	// List returns the servers at s.Path in src, in file order. A file
	// that does not parse is a *SyntaxError.
	List(src []byte, s Schema) ([]Server, error)
	// Wrap rewrites server name to run exe with prefix (which ends with
	// "--"), then its old command and arguments. When s.Args is empty
	// (the command is an array), exe and prefix go in front of the array.
	Wrap(src []byte, s Schema, name, exe string, prefix []string) ([]byte, error)
	// Unwrap undoes Wrap for server name.
	Unwrap(src []byte, s Schema, name string) ([]byte, error)
}

// SyntaxError is a config file that does not parse: reported as
// file:line:col: why, and the file is left untouched.
type SyntaxError struct {
	Line, Col int // 1-based
	Msg       string
}

func (e *SyntaxError) Error() string { return e.Msg }
