//! Tokens of the berth language, as the parser sees them.
//!
//! Literal values are already decoded (numbers exact, strings unescaped) so the parser and
//! later stages never look at source text again. Comments are not tokens: the lexer hands
//! them over separately as trivia (the formatter and doc attachment use them).

use std::fmt;

/// An exact decimal number as written: `mantissa × 10^-scale` (`0.90` is 90 × 10^-2).
/// No floating point anywhere: money and quantities must not round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Num {
    pub mantissa: u64,
    pub scale: u8,
}

impl Num {
    pub fn int(n: u64) -> Self {
        Num {
            mantissa: n,
            scale: 0,
        }
    }

    pub fn is_integer(self) -> bool {
        self.scale == 0
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.scale == 0 {
            return write!(f, "{}", self.mantissa);
        }
        let digits = format!(
            "{:0>width$}",
            self.mantissa,
            width = self.scale as usize + 1
        );
        let (int, frac) = digits.split_at(digits.len() - self.scale as usize);
        write!(f, "{int}.{frac}")
    }
}

/// What a unit measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dimension {
    /// Bytes.
    Size,
    /// Nanoseconds.
    Duration,
    /// Bits per second.
    Bandwidth,
}

macro_rules! units {
    ($($name:ident = $text:literal, $dim:ident, $factor:expr;)*) => {
        /// A unit suffix of a quantity literal.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Unit { $($name,)* }

        impl Unit {
            pub const ALL: &'static [Unit] = &[$(Unit::$name,)*];

            /// The suffix as written in source.
            pub fn as_str(self) -> &'static str {
                match self { $(Unit::$name => $text,)* }
            }

            pub fn dimension(self) -> Dimension {
                match self { $(Unit::$name => Dimension::$dim,)* }
            }

            /// How many base units (bytes, nanoseconds, bits/s) one of this unit is.
            pub fn factor(self) -> u128 {
                match self { $(Unit::$name => $factor,)* }
            }

            pub fn from_suffix(s: &str) -> Option<Unit> {
                match s { $($text => Some(Unit::$name),)* _ => None }
            }
        }
    };
}

const KI: u128 = 1024;
const K: u128 = 1000;

units! {
    B = "B", Size, 1;
    KB = "KB", Size, K;
    MB = "MB", Size, K * K;
    GB = "GB", Size, K * K * K;
    TB = "TB", Size, K * K * K * K;
    PB = "PB", Size, K * K * K * K * K;
    KiB = "KiB", Size, KI;
    MiB = "MiB", Size, KI * KI;
    GiB = "GiB", Size, KI * KI * KI;
    TiB = "TiB", Size, KI * KI * KI * KI;
    PiB = "PiB", Size, KI * KI * KI * KI * KI;
    Ns = "ns", Duration, 1;
    Us = "us", Duration, K;
    Ms = "ms", Duration, K * K;
    S = "s", Duration, K * K * K;
    Min = "m", Duration, 60 * K * K * K;
    H = "h", Duration, 3600 * K * K * K;
    D = "d", Duration, 86_400 * K * K * K;
    W = "w", Duration, 7 * 86_400 * K * K * K;
    Bps = "bps", Bandwidth, 1;
    Kbps = "Kbps", Bandwidth, K;
    Mbps = "Mbps", Bandwidth, K * K;
    Gbps = "Gbps", Bandwidth, K * K * K;
    Tbps = "Tbps", Bandwidth, K * K * K * K;
}

/// A number with a unit: `16GiB`, `20ms`, `1.5Gbps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quantity {
    pub value: Num,
    pub unit: Unit,
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.value, self.unit.as_str())
    }
}

/// A wall-clock time of day `HH:MM`, as minutes since midnight (0..=1440; `24:00` is allowed
/// as the end of a range).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClockTime {
    pub minutes: u16,
}

impl fmt::Display for ClockTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.minutes / 60, self.minutes % 60)
    }
}

/// A token. Identifiers borrow from the source; strings are unescaped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Token<'src> {
    Ident(&'src str),
    Int(u64),
    Decimal(Num),
    Quantity(Quantity),
    Clock(ClockTime),
    Str(String),

    // Hard keywords: never identifiers.
    Use,
    Const,
    True,
    False,
    And,
    Or,
    Not,
    In,
    When,
    During,

    LBrace,
    RBrace,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Comma,
    Colon,
    Semi,
    Dot,
    DotDot,
    Assign,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Arrow,
    Plus,
    Minus,
    Star,
    Slash,

    /// Stands where the lexer found something it reported (bad character, bad number,
    /// unterminated string). The parser accepts it as an expression hole and never reports
    /// an error of its own at it.
    Invalid,
}

impl Token<'_> {
    /// How the token is named in "expected …" messages.
    pub fn describe(&self) -> String {
        match self {
            Token::Ident(s) => format!("`{s}`"),
            Token::Int(n) => format!("`{n}`"),
            Token::Decimal(n) => format!("`{n}`"),
            Token::Quantity(q) => format!("`{q}`"),
            Token::Clock(c) => format!("`{c}`"),
            Token::Str(_) => "a string".to_string(),
            Token::Invalid => "an invalid token".to_string(),
            other => format!("`{other}`"),
        }
    }
}

impl fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Token::Ident(s) => return f.write_str(s),
            Token::Int(n) => return write!(f, "{n}"),
            Token::Decimal(n) => return write!(f, "{n}"),
            Token::Quantity(q) => return write!(f, "{q}"),
            Token::Clock(c) => return write!(f, "{c}"),
            Token::Str(s) => return write!(f, "{s:?}"),
            Token::Use => "use",
            Token::Const => "const",
            Token::True => "true",
            Token::False => "false",
            Token::And => "and",
            Token::Or => "or",
            Token::Not => "not",
            Token::In => "in",
            Token::When => "when",
            Token::During => "during",
            Token::LBrace => "{",
            Token::RBrace => "}",
            Token::LBracket => "[",
            Token::RBracket => "]",
            Token::LParen => "(",
            Token::RParen => ")",
            Token::Comma => ",",
            Token::Colon => ":",
            Token::Semi => ";",
            Token::Dot => ".",
            Token::DotDot => "..",
            Token::Assign => "=",
            Token::EqEq => "==",
            Token::NotEq => "!=",
            Token::Lt => "<",
            Token::Le => "<=",
            Token::Gt => ">",
            Token::Ge => ">=",
            Token::Arrow => "->",
            Token::Plus => "+",
            Token::Minus => "-",
            Token::Star => "*",
            Token::Slash => "/",
            Token::Invalid => "<invalid>",
        };
        f.write_str(s)
    }
}

#[cfg(any(test, feature = "testing"))]
/// The hard keywords, for editors and "is this a name?" checks.
pub const KEYWORDS: &[&str] = &[
    "use", "const", "true", "false", "and", "or", "not", "in", "when", "during",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_display_is_exact() {
        assert_eq!(
            Num {
                mantissa: 90,
                scale: 2
            }
            .to_string(),
            "0.90"
        );
        assert_eq!(
            Num {
                mantissa: 5,
                scale: 3
            }
            .to_string(),
            "0.005"
        );
        assert_eq!(
            Num {
                mantissa: 1234,
                scale: 1
            }
            .to_string(),
            "123.4"
        );
        assert_eq!(Num::int(7).to_string(), "7");
    }
}
