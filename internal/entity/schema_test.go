package entity_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/erpsync/erpsync/internal/entity"
)

// compileSchema compiles entity.JSONSchema.
func compileSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(entity.JSONSchema()))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("config.schema.json")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return s
}

// asJSON is the YAML file data as the JSON value an editor checks.
func asJSON(t testing.TB, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	b, err := json.Marshal(stringKeys(v))
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// stringKeys turns YAML maps with other keys than strings into JSON
// objects, as an editor's YAML support does.
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = stringKeys(x)
		}
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[fmt.Sprint(k)] = stringKeys(x)
		}
		return out
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Sprint(v) // .inf and .nan: JSON has no such number
		}
	case []any:
		for i, x := range v {
			v[i] = stringKeys(x)
		}
	}
	return v
}

func TestSchemaAcceptsTheExamples(t *testing.T) {
	s := compileSchema(t)
	files := map[string][]byte{"good": []byte(good)}
	for _, path := range examples(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[path] = b
	}
	for name, b := range files {
		if err := s.Validate(asJSON(t, b)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestSchemaRefusesStructuralMistakes(t *testing.T) {
	s := compileSchema(t)
	n := 0
	for _, c := range badCases(t) {
		if !c.structural {
			continue
		}
		n++
		if _, err := entity.Parse("c.yaml", []byte(c.file)); err == nil {
			t.Errorf("%s: the loader takes it", c.name)
		}
		if err := s.Validate(asJSON(t, []byte(c.file))); err == nil {
			t.Errorf("%s: the schema takes it:\n%s", c.name, c.file)
		}
	}
	if n < 10 {
		t.Errorf("only %d structural cases", n)
	}
}

func TestJSONSchemaIsACopy(t *testing.T) {
	a := entity.JSONSchema()
	a[0] = 'x'
	if entity.JSONSchema()[0] != '{' {
		t.Error("JSONSchema returns its own bytes")
	}
}
