//! The path policy, applied before any file is touched: a path is resolved against the
//! workspace's `cwd`, canonicalized (symlinks followed; for a file not yet there, its nearest
//! existing folder), and must lie inside one of the canonical roots. Inside them, Blade's
//! dangerous system paths stay refused unless a root itself lies inside one.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{Answer, Workspace};

/// Blade's text when the run's context has no `capabilities.filesystem.roots`.
pub const NO_FILESYSTEM: &str = "No filesystem access in the current runtime context.";

/// Blade's dangerous system path prefixes (`createPathSafetyPermissionHandler`).
const DANGEROUS: &[&str] = &["/etc/", "/sys/", "/proc/", "/dev/", "/boot/", "/root/"];

/// A path the policy let through: the canonical path, and whether it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authorized {
    pub path: PathBuf,
    pub exists: bool,
}

/// Checks `input` (a tool's path argument) against the workspace.
pub(crate) fn authorize(input: &str, workspace: &Workspace) -> Result<Authorized, Answer> {
    if workspace.roots.is_empty() {
        return Err(Answer::error(NO_FILESYSTEM));
    }
    if input.contains('\0') {
        return Err(Answer::error(format!(
            "Invalid filesystem path: {}",
            input.replace('\0', "\\0")
        )));
    }
    let given = Path::new(input);
    let absolute = if given.is_absolute() {
        given.to_path_buf()
    } else {
        match &workspace.cwd {
            Some(cwd) => cwd.join(given),
            None => {
                return Err(Answer::error(format!(
                    "Relative filesystem path requires a working directory: {input}"
                )))
            }
        }
    };
    let resolved = canonical(&absolute, input)?;
    let roots = canonical_roots(workspace);
    let Some(root) = roots.iter().find(|root| resolved.path.starts_with(root)) else {
        return Err(Answer::error(format!(
            "Filesystem path is outside authorized roots: {input}"
        )));
    };
    if let Some(prefix) = dangerous(&resolved.path) {
        // A root strictly inside the prefix was given on purpose (`/etc/myapp`); a root at or
        // above it (`/etc`, `/`) was not.
        let prefix = Path::new(prefix.trim_end_matches('/'));
        if !(root.starts_with(prefix) && root != prefix) {
            return Err(Answer::error(format!(
                "Access to dangerous system paths denied: {}",
                resolved.path.display()
            )));
        }
    }
    Ok(resolved)
}

/// A folder for Glob, Grep and Bash: `given`, else the workspace's `cwd`; `missing` is the
/// tool's text for having neither.
pub(crate) fn directory(given: Option<&str>, workspace: &Workspace, missing: &str) -> Result<PathBuf, Answer> {
    let input = match (given, &workspace.cwd) {
        (Some(path), _) => path.to_string(),
        (None, Some(cwd)) => cwd.to_string_lossy().into_owned(),
        (None, None) if workspace.roots.is_empty() => return Err(Answer::error(NO_FILESYSTEM)),
        (None, None) => return Err(Answer::error(missing)),
    };
    let authorized = authorize(&input, workspace)?;
    if !authorized.exists {
        return Err(Answer::error(format!("Search path does not exist: {input}")));
    }
    if !authorized.path.is_dir() {
        return Err(Answer::error(format!("Search path must be a directory: {input}")));
    }
    Ok(authorized.path)
}

/// The roots, canonical; a root that does not exist authorizes nothing.
fn canonical_roots(workspace: &Workspace) -> Vec<PathBuf> {
    workspace
        .roots
        .iter()
        .filter_map(|root| {
            let absolute = match (&workspace.cwd, root.is_absolute()) {
                (Some(cwd), false) => cwd.join(root),
                _ => root.clone(),
            };
            std::fs::canonicalize(absolute).ok()
        })
        .collect()
}

/// `path` with symlinks followed. For a path not there yet, its nearest existing ancestor is
/// canonicalized and the rest appended (no `..` may follow); a dangling symlink is refused.
fn canonical(path: &Path, input: &str) -> Result<Authorized, Answer> {
    match std::fs::canonicalize(path) {
        Ok(path) => return Ok(Authorized { path, exists: true }),
        Err(error) if error.kind() != ErrorKind::NotFound => {
            return Err(Answer::error(format!(
                "Filesystem path cannot be resolved: {input} ({error})"
            )))
        }
        Err(_) => {}
    }
    // The names past the nearest existing ancestor; `missing/../x` has none to take (the file
    // name of `missing/..` is nothing) and is refused below rather than guessed at.
    let mut rest = Vec::new();
    let mut ancestor = path;
    loop {
        if std::fs::symlink_metadata(ancestor).is_ok() {
            break;
        }
        match (ancestor.file_name(), ancestor.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_owned());
                ancestor = parent;
            }
            _ => return Err(Answer::error(format!("Filesystem path cannot be resolved: {input}"))),
        }
    }
    // The ancestor exists as an entry; if it does not resolve, it is a dangling link.
    let Ok(mut resolved) = std::fs::canonicalize(ancestor) else {
        return Err(Answer::error(format!(
            "Filesystem path contains an unresolved symbolic link: {input}"
        )));
    };
    for name in rest.iter().rev() {
        resolved.push(name);
    }
    Ok(Authorized {
        path: resolved,
        exists: false,
    })
}

fn dangerous(path: &Path) -> Option<&'static str> {
    let text = format!("{}/", path.display());
    DANGEROUS.iter().copied().find(|prefix| text.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn workspace(root: &Path) -> Workspace {
        Workspace {
            roots: vec![root.to_path_buf()],
            cwd: Some(root.to_path_buf()),
        }
    }

    #[test]
    fn no_roots_no_access() {
        let error = authorize("/tmp/x", &Workspace::default()).unwrap_err();
        assert_eq!(error, Answer::error(NO_FILESYSTEM));
    }

    #[test]
    fn relative_paths_need_a_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace {
            roots: vec![dir.path().into()],
            cwd: None,
        };
        assert_eq!(
            authorize("a.txt", &workspace).unwrap_err().text,
            "Relative filesystem path requires a working directory: a.txt"
        );
    }

    #[test]
    fn inside_the_roots_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::fs::write(dir.path().join("outside.txt"), "o").unwrap();
        let workspace = workspace(&root);
        let inside = authorize("a.txt", &workspace).unwrap();
        assert!(inside.exists);
        assert_eq!(inside.path, root.canonicalize().unwrap().join("a.txt"));
        let missing = authorize("new/deeper/b.txt", &workspace).unwrap();
        assert!(!missing.exists);
        assert_eq!(missing.path, root.canonicalize().unwrap().join("new/deeper/b.txt"));
        let missing_outside = "../elsewhere/new.txt".to_string();
        std::fs::create_dir(dir.path().join("elsewhere")).unwrap();
        for escape in [
            "../outside.txt",
            &dir.path().join("outside.txt").display().to_string(),
            &missing_outside,
            "../new.txt",
        ] {
            assert_eq!(
                authorize(escape, &workspace).unwrap_err().text,
                format!("Filesystem path is outside authorized roots: {escape}")
            );
        }
    }

    #[test]
    fn symlinks_are_followed_out_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        symlink(dir.path().join("secret"), root.join("link")).unwrap();
        symlink(dir.path(), root.join("up")).unwrap();
        symlink(root.join("nowhere"), root.join("dangling")).unwrap();
        let workspace = workspace(&root);
        assert_eq!(
            authorize("link", &workspace).unwrap_err().text,
            "Filesystem path is outside authorized roots: link"
        );
        assert_eq!(
            authorize("up/new.txt", &workspace).unwrap_err().text,
            "Filesystem path is outside authorized roots: up/new.txt"
        );
        assert_eq!(
            authorize("nowhere/../x", &workspace).unwrap_err().text,
            "Filesystem path cannot be resolved: nowhere/../x"
        );
        assert_eq!(
            authorize("dangling/x", &workspace).unwrap_err().text,
            "Filesystem path contains an unresolved symbolic link: dangling/x"
        );
    }

    #[test]
    fn dangerous_paths_under_a_broad_root() {
        let workspace = Workspace {
            roots: vec!["/".into()],
            cwd: Some("/".into()),
        };
        assert_eq!(
            authorize("/etc/hostname", &workspace).unwrap_err().text,
            "Access to dangerous system paths denied: /etc/hostname"
        );
        assert!(authorize("/etc", &workspace).is_err());
        // A root given inside the prefix is the user's choice.
        let inside = Workspace {
            roots: vec!["/etc".into()],
            cwd: None,
        };
        assert!(
            authorize("/etc/hostname", &inside).is_err(),
            "the root is the prefix itself"
        );
        assert!(authorize("/usr/bin", &workspace).is_ok());
    }

    #[test]
    fn directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "").unwrap();
        let workspace = workspace(dir.path());
        assert_eq!(
            directory(None, &workspace, "missing").unwrap(),
            dir.path().canonicalize().unwrap()
        );
        assert_eq!(
            directory(Some("f"), &workspace, "missing").unwrap_err().text,
            "Search path must be a directory: f"
        );
        assert_eq!(
            directory(Some("nope"), &workspace, "missing").unwrap_err().text,
            "Search path does not exist: nope"
        );
        let no_cwd = Workspace {
            roots: vec![dir.path().into()],
            cwd: None,
        };
        assert_eq!(directory(None, &no_cwd, "missing").unwrap_err().text, "missing");
    }
}
