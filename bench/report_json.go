package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultOut is bench-results/<scenario>-<timestamp>.json.
func DefaultOut(scenario string, t time.Time) string {
	return filepath.Join("bench-results", fmt.Sprintf("%s-%s.json", scenario, t.Format("20060102-150405")))
}

// WriteJSON writes res as indented JSON to path.
func WriteJSON(path string, res *Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteOutputs writes the JSON result to jsonPath, the HTML report beside
// it (same basename, .html) and, when records is set, every request as
// gzipped JSON lines (.records.jsonl.gz). res.Files names them.
func WriteOutputs(res *Result, jsonPath string, records bool) error {
	if dir := filepath.Dir(jsonPath); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	base := strings.TrimSuffix(jsonPath, filepath.Ext(jsonPath))
	res.Files = Files{JSON: jsonPath, HTML: base + ".html"}
	if records && len(res.records) > 0 {
		res.Files.Records = base + ".records.jsonl.gz"
		if err := WriteRecords(res.Files.Records, res.records); err != nil {
			return fmt.Errorf("write records: %w", err)
		}
	}
	if err := WriteJSON(jsonPath, res); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	if err := WriteHTML(res.Files.HTML, res); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
