package instrument

import "fmt"

// A Source names where a run executes wherever that is said: where a
// trace's numbers came from (its header), where a run asks to go
// (kernels.Config.Engine, the URL's engine field), where the router sends
// it (runner.Route.Engine), which engine a sweep times on. SourceAny, the
// zero value, is a request's "wherever the server decides" (engine=auto);
// it is never a trace's.
const SourceAny Source = 0

// ParseSource reads a source by its name: "cpu", "gpu" or "recording".
func ParseSource(s string) (Source, bool) { return parseEnum(sourceNames, s) }

// MarshalText writes a source by its name, SourceAny as "auto", so that
// JSON says "gpu" (a sweep's engine, the engines a page offers).
func (s Source) MarshalText() ([]byte, error) {
	if s == SourceAny {
		return []byte("auto"), nil
	}
	if _, ok := sourceNames[s]; !ok {
		return nil, fmt.Errorf("instrument: no source %d", uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads what MarshalText writes; "" is SourceAny too.
func (s *Source) UnmarshalText(b []byte) error {
	if len(b) == 0 || string(b) == "auto" {
		*s = SourceAny
		return nil
	}
	v, ok := ParseSource(string(b))
	if !ok {
		return fmt.Errorf("instrument: no source %q", b)
	}
	*s = v
	return nil
}
