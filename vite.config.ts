// Library build of the anywidget front end: one ES module (+ CSS) inside the
// Python package, loaded by SSBWidget._esm / _css.
import { defineConfig } from "vitest/config";

export default defineConfig({
  build: {
    outDir: "python/livessb/static",
    emptyOutDir: true,
    target: "es2022",
    minify: false,
    sourcemap: false,
    lib: {
      entry: "js/widget.ts",
      formats: ["es"],
      fileName: () => "widget.js",
      cssFileName: "widget",
    },
  },
  test: {
    include: ["js/**/*.test.ts"],
    environment: "node",
  },
});
