//! The folder import rule of `docs/architecture.md` ("Which folder may import which"): a module
//! imports only modules on its floor or below, and no modules import each other in a circle.
//! Read from the `use crate::…` / `super::…` paths of `src/**/*.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Floors, lowest first; a module's floor is that of its longest listed prefix.
const FLOORS: &[(&str, u8)] = &[
    // Ground floor: imports nothing above it.
    ("error", 0),
    ("ids", 0),
    ("text", 0),
    ("host", 0),
    ("offload", 0),
    ("js_value", 0),
    ("options", 0),
    ("pace", 0),
    ("sync", 0),
    ("hook_event", 0),
    // Clients and transport: know nothing of hooks or the agent.
    ("model", 1),
    ("webhook", 1),
    // Command hooks' process, stdin and answer; their HTTP kind reuses the webhook transport.
    ("command_hook", 1),
    ("mcp", 1),
    // The built-in tools (Read, Grep, Bash …): files, searches and processes, no agent.
    ("builtins", 1),
    // Reporting, and the store sessions are kept in.
    ("log", 2),
    ("telemetry", 2),
    ("store", 2),
    ("hooks", 3),
    // The agent's parts: options, definitions, events, tools, payloads, the pause vocabulary,
    // the conversation. They know nothing of the store port, the loop or the session.
    ("agent", 4),
    // Durability (the store port, recovery, the outbox glue, deferred results) and delegation
    // (a `Task` call starting a run through `Children`): below the loop, importing none of it.
    ("agent::durable", 5),
    ("agent::subagents::delegate", 5),
    // The loop of one `send` (admission, steps, pause and resume, compaction, the claim keeper).
    ("agent::run", 6),
    ("agent::session", 7),
    ("binding", 8),
    ("lib", 9),
];

fn floor(module: &str) -> u8 {
    FLOORS
        .iter()
        .filter(|(prefix, _)| module == *prefix || module.starts_with(&format!("{prefix}::")))
        .max_by_key(|(prefix, _)| prefix.len())
        .unwrap_or_else(|| panic!("{module} has no floor in tests/layers.rs: give it one"))
        .1
}

/// A file's module path: `hooks::dispatch` for `src/hooks/dispatch.rs`, `hooks` for its `mod.rs`.
fn module_of(relative: &str) -> String {
    let path = relative.trim_end_matches(".rs").trim_end_matches("/mod");
    path.replace('/', "::")
}

struct Source {
    module: String,
    /// Its file, under `src/`.
    path: String,
    /// The code before its tests (circles are about the code that ships).
    code: String,
    all: String,
}

fn sources() -> Vec<Source> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<Source>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let relative = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                let all = std::fs::read_to_string(&path).unwrap();
                let code = without_tests(&all);
                out.push(Source {
                    module: module_of(&relative),
                    path: relative.clone(),
                    code,
                    all,
                });
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out
}

/// `text` without its `#[cfg(test)]` items (each ends at the first `}` in column 0).
fn without_tests(text: &str) -> String {
    let mut code = String::new();
    let mut in_test = false;
    for line in text.lines() {
        if line == "#[cfg(test)]" {
            in_test = true;
        } else if in_test && line == "}" {
            in_test = false;
        } else if !in_test {
            code.push_str(line);
            code.push('\n');
        }
    }
    code
}

/// What each folder's face (`mod.rs`) re-exports: item name → the module it comes from
/// (`hooks` → `HookError` → `hooks::dispatch`, for `pub use dispatch::{Dispatcher, HookError}`).
type Reexports = BTreeMap<String, BTreeMap<String, String>>;

fn reexports(sources: &[Source], modules: &BTreeSet<String>) -> Reexports {
    let statement = regex::Regex::new(r"(?m)^pub(?:\(crate\))? use ([^;]+);").unwrap();
    let mut table = Reexports::new();
    for source in sources {
        for captures in statement.captures_iter(&source.code) {
            let used = captures[1].trim();
            let (base, rest) = match used.strip_prefix("crate::") {
                Some(rest) => (String::new(), rest),
                None => (source.module.clone(), used.strip_prefix("self::").unwrap_or(used)),
            };
            for path in paths(rest) {
                let item = path.rsplit("::").next().unwrap().to_string();
                if let Some(module) = longest_module(&base, &path, modules) {
                    table.entry(source.module.clone()).or_default().insert(item, module);
                }
            }
        }
    }
    table
}

/// The longest prefix of `base::path` that is a module, and the segment right after it.
fn resolve<'p>(base: &str, path: &'p str, modules: &BTreeSet<String>) -> Option<(String, Option<&'p str>)> {
    let mut segments: Vec<&str> = if base.is_empty() {
        Vec::new()
    } else {
        base.split("::").collect()
    };
    let mut longest = None;
    let parts: Vec<&str> = path.split("::").collect();
    for (at, segment) in parts.iter().enumerate() {
        segments.push(segment);
        let module = segments.join("::");
        if modules.contains(&module) {
            longest = Some((module, parts.get(at + 1).copied()));
        }
    }
    longest
}

fn longest_module(base: &str, path: &str, modules: &BTreeSet<String>) -> Option<String> {
    resolve(base, path, modules).map(|(module, _)| module)
}

/// The modules `text` names through a path from the crate root (`crate::a::b::c`) or from its
/// own module (`super::x`, `super::super::x`, brace groups included): for each, the longest
/// prefix that is a module (`hooks::dispatch` for `crate::hooks::dispatch::Caller`), and for an
/// item a folder's face re-exports, the module it comes from (`hook_event` for
/// `crate::hooks::HookEvent`).
fn imports(text: &str, source: &Source, modules: &BTreeSet<String>, reexports: &Reexports) -> BTreeSet<String> {
    let start = regex::Regex::new(r"\b(crate|super)((?:::super)*)::").unwrap();
    // The module `super` names: the parent of the file's module.
    let parent = |module: &str| {
        module
            .rsplit_once("::")
            .map_or(String::new(), |(parent, _)| parent.to_string())
    };
    let mut found = BTreeSet::new();
    for captures in start.captures_iter(text) {
        let base = match &captures[1] {
            "crate" => String::new(),
            _ => {
                let mut base = parent(&source.module);
                for _ in 0..captures[2].matches("super").count() {
                    base = parent(&base);
                }
                base
            }
        };
        let rest = &text[captures.get(0).unwrap().end()..];
        for path in paths(rest) {
            if let Some((module, item)) = resolve(&base, &path, modules) {
                let origin = item.and_then(|item| reexports.get(&module)?.get(item));
                found.insert(origin.cloned().unwrap_or(module));
            }
        }
    }
    found.remove(&source.module);
    found
}

/// The module paths a `use` tail names: `a::b::C` is `a::b::C`; `{a, b::{c, d}}` is `a`, `b::c`
/// and `b::d`. Stops at the first character that cannot continue a path.
fn paths(rest: &str) -> Vec<String> {
    let ident = |text: &str| -> usize {
        text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(text.len())
    };
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 1;
        let mut end = group.len();
        for (at, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = at;
                        break;
                    }
                }
                _ => {}
            }
        }
        let inner = &group[..end];
        let (mut items, mut depth, mut from) = (Vec::new(), 0, 0);
        for (at, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&inner[from..at]);
                    from = at + 1;
                }
                _ => {}
            }
        }
        items.push(&inner[from..]);
        return items.iter().flat_map(|item| paths(item.trim())).collect();
    }
    let length = ident(rest);
    if length == 0 {
        return Vec::new();
    }
    let (head, tail) = rest.split_at(length);
    match tail.strip_prefix("::") {
        Some(tail) => {
            let deeper = paths(tail);
            if deeper.is_empty() {
                vec![head.to_string()]
            } else {
                deeper.into_iter().map(|path| format!("{head}::{path}")).collect()
            }
        }
        None => vec![head.to_string()],
    }
}

#[test]
fn no_module_imports_a_floor_above_it() {
    let sources = sources();
    let modules: BTreeSet<String> = sources.iter().map(|source| source.module.clone()).collect();
    let reexports = reexports(&sources, &modules);
    let mut wrong = Vec::new();
    for source in &sources {
        for target in imports(&source.all, source, &modules, &reexports) {
            if floor(&target) > floor(&source.module) {
                wrong.push(format!(
                    "{} (floor {}) imports {target} (floor {})",
                    source.module,
                    floor(&source.module),
                    floor(&target)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "imports that go up a floor:\n{}", wrong.join("\n"));
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let sources = sources();
    let modules: BTreeSet<String> = sources.iter().map(|source| source.module.clone()).collect();
    let reexports = reexports(&sources, &modules);
    // An import of a face's own item is an edge to the face; of an item it re-exports, an edge
    // to the module the item comes from. No exceptions: a file naming its own folder's face
    // depends on that face like any other module.
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for source in &sources {
        let targets = imports(&source.code, source, &modules, &reexports);
        edges.entry(source.module.clone()).or_default().extend(targets);
    }
    // Depth-first search; a module met again while still on the path closes a circle.
    fn visit(
        module: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|on| on == module) {
            let mut circle = path[at..].to_vec();
            circle.push(module.to_string());
            return Some(circle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in edges.get(module).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for module in edges.keys() {
        if let Some(circle) = visit(module, &edges, &mut Vec::new(), &mut done) {
            panic!("modules import each other in a circle: {}", circle.join(" -> "));
        }
    }
}

/// `docs/architecture.md` names every file of `src/`: a file on the ground (`src/sync.rs`) by
/// its path, a file in a folder by its name in the folder's section of the map (`src/agent/`,
/// or `run/` inside it).
#[test]
fn every_module_is_named_in_the_architecture_doc() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    for source in sources() {
        let relative = source.path.clone();
        let named = match source.module.rsplit_once("::") {
            None => doc.contains(&format!("src/{relative}")) || doc.contains(&format!("src/{}/", source.module)),
            Some((folder, _)) => {
                let file = Path::new(&relative).file_name().unwrap().to_string_lossy().to_string();
                let section = folder.rsplit("::").next().unwrap();
                let file = if doc.contains(&format!("src/{}/", folder.replace("::", "/")))
                    || doc.contains(&format!(" {section}/"))
                {
                    file
                } else {
                    String::from("\u{0}")
                };
                // A folder's face is `mod.rs`; every other file is named by its file name.
                doc.contains(&format!(" {file} ")) || doc.contains(&format!("`{file}`")) || file == "mod.rs"
            }
        };
        if !named {
            missing.push(relative);
        }
    }
    assert!(
        missing.is_empty(),
        "files of src/ that docs/architecture.md does not name:\n{}",
        missing.join("\n")
    );
}
