// Build config: the API serves dist/ at "/"; during development `npm run dev` proxies the API.
import { copyFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { defineConfig, type Plugin } from "vitest/config";

const api = process.env.ROLLOUT_URL ?? "http://127.0.0.1:8000";

// The API's /docs page (Swagger UI) loads its script and styles from dist/swagger-ui/, so it
// works without internet (FastAPI's default page loads them from a CDN). app/main.py serves it.
const SWAGGER_FILES = ["swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "LICENSE", "NOTICE"];

function swaggerUiAssets(): Plugin {
  let outDir = "dist";
  return {
    name: "rollout-swagger-ui-assets",
    apply: "build",
    configResolved(config) {
      outDir = config.build.outDir;
    },
    closeBundle() {
      const source = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
      const target = join(outDir, "swagger-ui");
      mkdirSync(target, { recursive: true });
      for (const file of SWAGGER_FILES) copyFileSync(join(source, file), join(target, file));
    },
  };
}

export default defineConfig({
  base: "/",
  plugins: [swaggerUiAssets()],
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", chunkSizeWarningLimit: 300 },
  server: {
    proxy: {
      "/api": { target: api, ws: true, changeOrigin: true },
      "/openapi.json": { target: api, changeOrigin: true },
      "/swagger-ui": { target: api, changeOrigin: true },
    },
  },
  test: { include: ["tests/**/*.test.ts"], environment: "node" },
});
