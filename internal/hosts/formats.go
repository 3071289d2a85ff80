package hosts

import "fmt"

// editorFor returns the Editor of a format.
func editorFor(f Format) (Editor, error) {
	switch f {
	case JSON:
		return jsonEditor{}, nil
	case TOML:
		return tomlEditor{}, nil
	case YAML:
		return yamlEditor{}, nil
	}
	return nil, fmt.Errorf("%s files are not supported yet", f)
}
