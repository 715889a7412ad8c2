//! Merging a TOML run file and `--set` overrides into the preset's table: every
//! key must already exist and keep its type, so typos and wrong types are named.
//! The one exception is a free table ([`FREE_TABLES`]): its keys are the
//! user's (a Python environment's keyword arguments).

use super::ConfigError;

pub(super) fn parse_override(s: &str) -> Result<(String, toml::Value), ConfigError> {
    let (key, raw) = s
        .split_once('=')
        .ok_or_else(|| ConfigError::BadOverride(s.into()))?;
    let key = key.trim();
    if key.is_empty() || !key.contains('.') {
        return Err(ConfigError::BadOverride(s.into()));
    }
    let raw = raw.trim();
    // A TOML literal if it parses as one (numbers, bools, arrays, quoted strings), else a bare string.
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    Ok((key.to_string(), value))
}

fn type_name(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a number",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a datetime",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

/// Replaces `old` with `new` if the types agree (an integer is accepted for a float).
fn typed_replace(old: &mut toml::Value, new: toml::Value, key: &str) -> Result<(), ConfigError> {
    let new = match (&*old, new) {
        (toml::Value::Float(_), toml::Value::Integer(i)) => toml::Value::Float(i as f64),
        (toml::Value::Table(_), _) => {
            return Err(ConfigError::WrongType {
                key: key.into(),
                expected: "a table of keys",
                got: "a value".into(),
            });
        }
        (o, n) if std::mem::discriminant(o) == std::mem::discriminant(&n) => n,
        (o, n) => {
            return Err(ConfigError::WrongType {
                key: key.into(),
                expected: type_name(o),
                got: n.to_string(),
            });
        }
    };
    *old = new;
    Ok(())
}

/// Tables whose keys are free: the run file's table replaces the preset's,
/// and `--set` may add keys to it.
const FREE_TABLES: &[&str] = &["env.kwargs"];

pub(super) fn merge_table(
    base: &mut toml::Table,
    over: toml::Table,
    prefix: &str,
) -> Result<(), ConfigError> {
    for (k, v) in over {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let slot = base
            .get_mut(&k)
            .ok_or_else(|| ConfigError::UnknownKey(key.clone()))?;
        if FREE_TABLES.contains(&key.as_str()) {
            if !v.is_table() {
                return Err(ConfigError::WrongType {
                    key,
                    expected: "a table of keys",
                    got: v.to_string(),
                });
            }
            *slot = v;
            continue;
        }
        match (slot, v) {
            (toml::Value::Table(b), toml::Value::Table(o)) => merge_table(b, o, &key)?,
            (slot, v) => typed_replace(slot, v, &key)?,
        }
    }
    Ok(())
}

pub(super) fn set_key(
    base: &mut toml::Table,
    key: &str,
    value: toml::Value,
) -> Result<(), ConfigError> {
    let mut parts = key.split('.').peekable();
    let mut table = base;
    let mut path = String::new();
    while let Some(part) = parts.next() {
        if FREE_TABLES.contains(&path.as_str()) {
            // `--set env.kwargs.name=value`: any name, one level deep.
            if parts.peek().is_some() {
                return Err(ConfigError::UnknownKey(key.into()));
            }
            table.insert(part.to_string(), value);
            return Ok(());
        }
        path = if path.is_empty() {
            part.to_string()
        } else {
            format!("{path}.{part}")
        };
        let slot = table
            .get_mut(part)
            .ok_or_else(|| ConfigError::UnknownKey(key.into()))?;
        if parts.peek().is_none() {
            return typed_replace(slot, value, key);
        }
        table = match slot {
            toml::Value::Table(t) => t,
            _ => return Err(ConfigError::UnknownKey(key.into())),
        };
    }
    Err(ConfigError::UnknownKey(key.into()))
}
