package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/slotwheel/slotwheel/api/internal/answer"
)

// TestOpenAPIExamples requires openapi.json to show every operation in use, and its examples to be
// right: an example for every parameter, for every request body and for every JSON answer (success
// and error alike), each valid against its schema, and every error example carrying the message the
// server really sends for its code. A new route without examples, or with a wrong one, fails here.
func TestOpenAPIExamples(t *testing.T) {
	t.Parallel()
	doc, _ := loadDoc(t)
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	checked := 0

	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			name := method + " " + path

			for _, p := range op.Parameters {
				param := p.Value
				where := fmt.Sprintf("%s parameter %s (%s)", name, param.Name, param.In)
				values := parameterExamples(param)
				if len(values) == 0 {
					report("%s has no example", where)
				}
				for exName, v := range values {
					checked++
					if err := param.Schema.Value.VisitJSON(v, openapi3.VisitAsRequest(), openapi3.EnableFormatValidation()); err != nil {
						report("%s: example %s does not match its schema: %v", where, exName, err)
					}
				}
			}

			if op.RequestBody != nil {
				for _, ct := range sortedKeys(op.RequestBody.Value.Content) {
					where := fmt.Sprintf("%s request body (%s)", name, ct)
					media := op.RequestBody.Value.Content[ct]
					values := mediaExamples(media)
					if len(values) == 0 {
						report("%s has no example", where)
					}
					for exName, v := range values {
						checked++
						if err := media.Schema.Value.VisitJSON(v, openapi3.VisitAsRequest(), openapi3.EnableFormatValidation()); err != nil {
							report("%s: example %s does not match its schema: %v", where, exName, err)
						}
					}
				}
			}

			successes := 0
			for _, status := range sortedKeys(op.Responses.Map()) {
				resp := op.Responses.Value(status).Value
				if strings.HasPrefix(status, "2") {
					successes++
				}
				for _, ct := range sortedKeys(resp.Content) {
					where := fmt.Sprintf("%s answer %s (%s)", name, status, ct)
					media := resp.Content[ct]
					values := mediaExamples(media)
					// Every JSON answer has an example; the dashboard's HTML and the metrics' text
					// have one too, but their content is not ours to pin.
					if len(values) == 0 && (strings.Contains(ct, "json") || strings.HasPrefix(status, "2")) {
						report("%s has no example", where)
					}
					for exName, v := range values {
						checked++
						if err := media.Schema.Value.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.EnableFormatValidation()); err != nil {
							report("%s: example %s does not match its schema: %v", where, exName, err)
						}
						if msg := errorExampleMismatch(v); msg != "" {
							report("%s: example %s: %s", where, exName, msg)
						}
					}
				}
			}
			if successes == 0 && path != "/monitoring" { // /monitoring only redirects
				report("%s documents no 2xx answer", name)
			}
		}
	}
	slices.Sort(problems)
	require.Empty(t, problems, "openapi.json's examples")
	require.Greater(t, checked, 150, "too few examples were checked; has the walk broken?")
}

// parameterExamples are a parameter's examples by name ("example" for the single one).
func parameterExamples(p *openapi3.Parameter) map[string]any {
	out := map[string]any{}
	if p.Example != nil {
		out["example"] = p.Example
	}
	for name, ex := range p.Examples {
		out[name] = ex.Value.Value
	}
	return out
}

// mediaExamples are a media type's examples by name ("example" for the single one).
func mediaExamples(m *openapi3.MediaType) map[string]any {
	out := map[string]any{}
	if m.Example != nil {
		out["example"] = m.Example
	}
	for name, ex := range m.Examples {
		out[name] = ex.Value.Value
	}
	return out
}

// errorExampleMismatch checks an error body example against the catalog: its message must be the
// English message the server sends for its code and field. It returns "" for anything else.
func errorExampleMismatch(v any) string {
	body, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	e, ok := body["error"].(map[string]any)
	if !ok {
		return ""
	}
	code, _ := e["code"].(string)
	field, _ := e["field"].(string)
	got, _ := e["message"].(string)
	if answer.Catalog[answer.LangEN][code] == "" {
		return fmt.Sprintf("code %q has no message in the catalog", code)
	}
	if want := answer.Message(answer.LangEN, code, "", field); got != want {
		return fmt.Sprintf("message %q is not the server's %q", got, want)
	}
	return ""
}
