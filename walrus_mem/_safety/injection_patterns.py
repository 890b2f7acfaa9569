"""Regex tables for prompt-injection detection.

:func:`walrus_mem.safety.detect_injection` runs ``INJECTION_PATTERNS`` on every
normalised view. (The letters-only fold and its patterns went in issue 26: the learned
joint model catches every held-out attack they alone caught.)
"""

from __future__ import annotations

import re
from typing import Final

# ---------------------------------------------------------------------------
# injection detection
# ---------------------------------------------------------------------------

_F: Final = re.IGNORECASE | re.MULTILINE

_OVERRIDE_VERB = (
    r"(?:ignore|ignoring|disregard|forget|skip|bypass|override|overrule|neglect|abandon|discard"
    r"|dismiss|set\s+aside|throw\s+out|drop|stop\s+following|do\s+not\s+follow|don'?t\s+follow"
    r"|never\s+mind|pay\s+no\s+attention\s+to|cancel|erase|wipe|reset|circumvent|evade|remove"
    r"|disable|turn\s+off|deactivate|suspend|lift)"
)
_QUAL = (
    r"(?:all|any|every|each|the|your|these|those|previous|prior|above|earlier|preceding|foregoing"
    r"|former|original|initial|existing|current|old|system|developer'?s?|safety|default|given"
    r"|provided|other|of|that|you|were|have|been|got|received|whatever|my|content|ethical"
    r"|built-in|internal|hidden|standing|core|base)"
)
_STRONG_TARGET = (
    r"(?:instructions?|instruct|directives?|rules|guidelines?|guidance|prompts?|system\s+prompt"
    r"|constraints?|restrictions?|polic(?:y|ies)|guardrails?|programming|training|safeguards?"
    r"|filters?|limitations?|boundaries|protocols?|system\s+messages?|developer\s+messages?"
    r"|conditioning|alignment|moderation|censorship|ethics)"
)
_WEAK_TARGET = r"(?:messages?|context|conversation|commands?|orders|settings|text)"
# "the rules of Monopoly", "the instructions for the desk": narrowed to a topic, not an override
_NOT_NARROWED = (r"(?!\s+(?:of|for|about|on|in)\s+(?!(?:this|the|your|our)\s+(?:chat|conversation"
                 r"|session|system|assistant|ai|model|bot)\b|you\b))")

INJECTION_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (label, re.compile(rx, _F))
    for label, rx in (
        # -- instruction override ------------------------------------------------
        ("override", rf"\b{_OVERRIDE_VERB}\b(?:[\s,]+{_QUAL}\b){{0,6}}[\s,]+{_STRONG_TARGET}\b"
                     rf"{_NOT_NARROWED}"),
        (
            "override",
            rf"\b{_OVERRIDE_VERB}\b(?:[\s,]+{_QUAL}\b){{0,5}}[\s,]+(?:all|every|any)\b"
            rf"(?:[\s,]+{_QUAL}\b){{0,4}}[\s,]+{_WEAK_TARGET}\b",
        ),
        (
            "override",
            rf"\b{_OVERRIDE_VERB}\b[\s,]+(?:the\s+)?(?:system|developer)\s+{_WEAK_TARGET}\b",
        ),
        (
            "override",
            r"\b(?:ignore|disregard|forget)\s+(?:all\s+(?:of\s+)?)?(?:the\s+|everything\s+)?"
            r"(?:above|foregoing|preceding)\b(?!\s+(?:typo|email|e-mail|message|note|link|address"
            r"|number|comment|paragraph|section|draft|list|plan|figure|table|point|example"
            r"|estimate|question|one|date|price|quote)s?\b)",
        ),
        (
            "override",
            r"\bforget\s+(?:about\s+)?everything\s+(?:you(?:'ve|\s+have|\s+were)?\s+(?:been\s+)?"
            r"(?:told|taught|know|learned|learnt)|above|before\s+this|so\s+far|up\s+to\s+now)",
        ),
        (
            "override",
            r"\beverything\s+(?:you\s+(?:were|have\s+been|'ve\s+been)\s+told|above|before\s+this"
            r"(?:\s+point)?)\s+(?:no\s+longer\s+applies|is\s+(?:void|cancelled|canceled|obsolete"
            r"|irrelevant|wrong|invalid))",
        ),
        (
            "override",
            r"\b(?:your|the|all)\s+(?:previous|prior|earlier|original|initial|old|system)\s+"
            r"(?:instructions|rules|directives|guidelines|prompt)\s+(?:have\s+been|are|were|is)\s+"
            r"(?:revoked|cancelled|canceled|void|invalid|obsolete|replaced|overridden|suspended"
            r"|wrong|disabled|lifted|removed)",
        ),
        (
            "override",
            r"\b(?:new|updated|revised|real|actual|true|secret|hidden|additional|override|priority)"
            r"\s+(?:system\s+)?(?:instructions?|directives?|system\s+prompt|prompt)\s*(?:[:\-]"
            r"|(?:are|is)\s*:)",
        ),
        (
            "override",
            r"\byour\s+new\s+(?:instructions?|rules|task|objective|goal|role|purpose|directive"
            r"|mission|persona|identity)\s+(?:is|are|will\s+be)\b",
        ),
        (
            "override",
            # "the system override on our thermostat" names a device's switch
            r"\b(?:system|safety|security|admin|developer|emergency|priority)\s+override\b"
            r"(?!\s+(?:on|of|for|in)\s+(?:our|my|the|a)\s+(?!(?:ai|assistant|model|chat|system)\b))",
        ),
        (
            "override",
            r"\b(?:safety|content|security)\s+(?:filters?|guidelines|policies|restrictions"
            r"|checks)\s+(?:are\s+|have\s+been\s+)?(?:now\s+)?(?:disabled|off|removed|lifted"
            r"|suspended|deactivated)",
        ),
        (
            "override",
            r"\bwhatever\s+your\s+(?:instructions|rules|system\s+prompt|guidelines)\s+say",
        ),
        (
            "override",
            r"\b(?:top|highest|absolute)\s+priority\s+over\s+(?:the\s+|your\s+|all\s+)?"
            r"(?:system|developer|previous|other)",
        ),
        (
            "override",
            r"\b(?:obey|follow)\s+only\s+(?:me|this|these|my)\b|\bonly\s+obey\b|\bobey\s+(?:only\s+)?"
            r"(?:me|this\s+memory|the\s+memory|these\s+instructions|my\s+commands)\b",
        ),
        (
            "override",
            r"\b(?:follow|obey|do\s+what)\s+(?:this|the)\s+(?:memory|note)\b(?:\s+says)?",
        ),
        (
            "override",
            r"\bno\s+longer\s+(?:bound|restricted|constrained|limited)\s+by\b",
        ),
        # -- role hijack / jailbreak --------------------------------------------
        (
            "role_hijack",
            r"\byou\s+are\s+now\s+(?!able\b|allowed\s+to\s+(?:park|enter|book)|free\s+to\s+go"
            r"|registered|subscribed|enrolled|connected|logged|signed|booked|confirmed|checked"
            r"|ready|done|on\s+the\s+(?:list|team|waitlist)|in\s+(?:the\s+)?(?:queue|line"
            r"|waitlist))",
        ),
        (
            "role_hijack",
            r"\byou\s+are\s+no\s+longer\s+(?:an?\s+)?(?:ai|assistant|chatgpt|claude|gpt|bound"
            r"|restricted|limited|required|a\s+language\s+model|constrained)",
        ),
        (
            "role_hijack",
            r"\bfrom\s+now\s+on,?\s+you\s+(?:are|will\s+be|shall\s+be|must\s+act|act\s+as"
            r"|have\s+no|will\s+ignore|must\s+ignore|ignore|respond\s+as|play)\b",
        ),
        (
            "role_hijack",
            r"\b(?:act|behave|respond|roleplay|role-play|pose)\s+as\s+(?:if\s+you\s+(?:were|are)\s+)?"
            r"(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|jailbroken|evil|malicious|dan\b"
            r"|different\s+ai|ai\s+without|the\s+system|(?:root|admin(?:istrator)?|developer|hacker)"
            r"(?!\s+(?:advocate|relations|evangelist|experience|champion|on\s+call|for\s+the"
            r"|of\s+the|in\s+the|at\b))"
            r"|my\s+(?:late\s+|dead\s+|deceased\s+)?grand(?:ma|mother|pa|father))",
        ),
        (
            "role_hijack",
            r"\bpretend\s+(?:to\s+be|you\s+are|you're|that\s+you\s+are)\s+(?:an?\s+)?"
            r"(?:unrestricted|unfiltered|uncensored|jailbroken|evil|dan\b|different|not\s+an\s+ai"
            r"|the\s+system|the\s+developer|human|free|without|an?\s+ai\s+(?:with|without))",
        ),
        (
            "role_hijack",
            r"\b(?:dan|god|jailbreak|jailbroken|unrestricted|unfiltered|evil|chaos|sudo)\s+mode\b"
            r"|\b(?:you\s+are|you're)\s+(?:now\s+)?in\s+(?:developer|dan|god|debug|admin"
            r"|maintenance)\s+mode\b|\bdo\s+anything\s+now\b|\bmaintenance\s+mode\s+on\b",
        ),
        (
            "role_hijack",
            r"\bjailbr(?:eak|oken)\s+(?:prompt|the\s+(?:ai|model|assistant|llm|chatbot)|version"
            r"|ai|assistant)\b|\byou\s+(?:are|have\s+been)\s+(?:now\s+)?jailbroken\b",
        ),
        (
            "role_hijack",
            r"\bthe\s+real\s+user\s+is\s+not\b|\bi\s+am\s+your\s+(?:developer|creator"
            r"|administrator|admin|system|operator)\b|\bi\s+am\s+the\s+(?:developer|creator"
            r"|administrator|admin|system|operator)\b(?=\s*(?:[,;:!]|$|and\s+(?:i|you)\b"
            r"|so\s+you\b|now\b|here\b))",
        ),
        # -- role and tag spoofing ----------------------------------------------
        (
            "tag_spoof",
            r"<\s*/?\s*(?:system|assistant|developer|tool|function|user|human|instructions?|sys"
            r"|im_start|im_end|tool_calls?|tool_result|tool_response|tool_output|function_calls?"
            r"|function_result|function_response|functions|walrus-memories|memwal-memories"
            r"|relevant-memories|memory|memories|admin|prompt|context|system-prompt|system_prompt)"
            r"\b[^<>]{0,200}>",
        ),
        (
            "tag_spoof",
            r"<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id"
            r"|end_header_id|begin_of_text|tool|ipython)\s*\|>",
        ),
        ("tag_spoof", r"\[\s*/?\s*(?:inst|sys|system|assistant|admin)\s*\]|<<\s*/?\s*sys\s*>>"),
        (
            "tag_spoof",
            r"^\s*#{1,6}\s*(?:system|assistant|developer|instructions?|admin|human|user|response)"
            r"(?:\s+(?:prompt|message|note|override))?\s*:",
        ),
        (
            "tag_spoof",
            r"^\s*(?:system|developer|admin)\s*(?:message|prompt|override|instructions?|note)?\s*:"
            r"(?=[^\n]{0,120}\b(?:you|ignore|must|always|never|do\s+not|don'?t|respond|reply"
            r"|answer|comply|obey|continue|from\s+now|without|grant|disable|enable|mode)\b)",
        ),
        ("tag_spoof", r"\[\s*system\s*\]\s*\(#"),
        # -- fake tool results ---------------------------------------------------
        (
            "fake_tool_result",
            r"\b(?:tool|function)[ _-]?(?:result|output|response|call)s?\s*[:=]|"
            r"\bbegin\s+(?:tool|function)\s+(?:output|result|response)\b|"
            r"\[\s*(?:tool|function)[ _-]?(?:result|output|response)\s*\]",
        ),
        (
            "fake_tool_result",
            r"[\"']role[\"']\s*:\s*[\"'](?:system|tool|function|developer)[\"']|"
            r"[\"'](?:tool_calls?|function_call)[\"']\s*:",
        ),
        # -- tool-call coercion ----------------------------------------------------
        (
            "tool_coercion",
            r"\b(?:you\s+(?:must|should|need\s+to|have\s+to|are\s+required\s+to)|immediately|now|please"
            r"|always|be\s+sure\s+to|make\s+sure\s+(?:to|you)|first|must)\s+(?:call|invoke|execute"
            r"|run|use|trigger|fire)\s+(?:the\s+)?(?:[\w.-]+\s+)?(?:tool|function)\b",
        ),
        (
            "tool_coercion",
            r"\bmemory_(?:store|forget|update|delete_all|delete)\b",
        ),
        (
            "tool_coercion",
            r"\b(?:call|invoke|execute|run)\s+(?:the\s+)?`?[a-z][a-z0-9_]*_[a-z0-9_]+`?\s*\(|"
            r"\b(?:call|invoke)\s+(?:the\s+)?`?[a-z][a-z0-9_]*`?\s+(?:tool|function)\s+with\b",
        ),
        (
            "tool_coercion",
            r"\bexecute\s+(?:the\s+following|this)\s+(?:command|code|script|shell)|"
            r"\b(?:curl|wget)\s+[^\n|]{1,200}\|\s*(?:ba|z)?sh\b|\brm\s+-rf\s+[/~]",
        ),
        (
            "tool_coercion",
            r"\b(?:delete|erase|wipe|remove|clear|purge)\s+(?:all|every|each)\s+(?:of\s+)?"
            r"(?:your\s+|the\s+|my\s+|stored\s+|saved\s+|user'?s?\s+)*(?:memories|memory)\b",
        ),
        (
            "tool_coercion",
            r"\b(?:ai|agents?|assistants?|llms?|models?|bots?)\s+(?:\w+\s+){0,3}(?:must|should|shall)"
            r"\s+(?:\w+\s+){0,2}(?:call|invoke|execute|run|store|save)\b",
        ),
        (
            "tool_coercion",
            r"\bdecode\s+(?:this|the\s+following)\s+(?:base64|b64|hex|rot13)?[^\n]{0,40}?\b(?:and\s+)?"
            r"(?:follow|execute|obey|run|do)\b",
        ),
        # -- exfiltration ----------------------------------------------------------
        (
            "exfiltration",
            r"\b(?:send|post|upload|forward|e-?mail|leak|exfiltrate|transmit|share|submit|dump|fetch"
            r"|append|paste|beam|pipe)\b[^\n]{0,80}?\b(?:passwords?|api\s*keys?|secrets?|tokens?"
            r"|credentials|private\s+keys?|ssh\s+keys?|id_rsa|\.env|env(?:ironment)?\s+"
            r"variables?|conversation(?:\s+history)?|chat\s+(?:history|log)|memories|memory\s+"
            r"contents|system\s+prompt|cookies|session\s+tokens?|email\s+address|phone\s+number"
            r"|\.aws|dialog(?:ue)?\s+(?:history|log))\b[^\n]{0,80}?(?:\bto\b|\binto\b|\bat\b"
            r"|\bvia\b|\bon\b|:)\s*(?:this\s+|the\s+|a\s+|my\s+)?(?:https?://|www\.|[\w.+-]+@[\w-]+"
            r"\.|webhook|url|endpoint|server|pastebin|gist|attacker|address|link)",
        ),
        (
            "exfiltration",
            r"\b(?:send|post|upload|forward|e-?mail|transmit|leak)\s+(?:everything|all\s+"
            r"(?:messages|data|memories)|the\s+(?:whole|entire|full)\s+(?:conversation|chat)"
            r"|(?:the|this)\s+conversation|all\s+stored\s+memories|the\s+chat)\b",
        ),
        (
            "exfiltration",
            r"!\[[^\]]{0,100}\]\(\s*https?://[^)\s]*\?[^)\s]*\)|https?://\S*[?&][\w-]+=(?:\{|\[|%7b"
            r"|<|\$\{)",
        ),
        (
            "exfiltration",
            r"\b(?:upload|send|post|copy)\s+(?:the\s+)?contents?\s+of\s+[~/.]|"
            r"(?:~|\$home)/\.(?:ssh|aws|gnupg|config|netrc|docker)\b",
        ),
        # -- prompt leaks ---------------------------------------------------------------
        (
            "prompt_leak",
            r"\b(?:reveal|print|repeat|output|disclose|leak|dump|recite|translate|spell\s+out"
            r"|show|display|tell\s+me|give\s+me|share|expose|paste)\s+(?:me\s+)?(?:your|all\s+your"
            r"|the\s+(?:hidden|initial|original|secret|full|entire|exact|complete|raw|developer))\s+"
            r"(?:(?:hidden|initial|original|secret|full|entire|exact|complete|raw|first|previous"
            r"|prior)\s+)?(?:system\s+)?(?:prompt|instructions|developer\s+message|configuration|rules"
            r"|guidelines|directives)\b(?!\s+(?:for|on|to|of|in|about|from|that\s+came)\b)",
        ),
        (
            "prompt_leak",
            r"\b(?:reveal|print|repeat|output|disclose|leak|dump|recite|translate)\s+(?:the\s+)?"
            r"(?:system\s+prompt|developer\s+message|system\s+message|hidden\s+instructions)\b",
        ),
        (
            "prompt_leak",
            r"\brepeat\s+(?:everything|all|the\s+text|the\s+words|what\s+is\s+written)\s+"
            r"(?:above|before|prior)|\bincluding\s+(?:the\s+)?hidden\s+instructions\b",
        ),
        # -- memory poisoning: text addressed to the model --------------------------
        (
            "poisoning",
            r"\bwhen(?:ever)?\s+you\s+(?:read|see|recall|retrieve|load|process|encounter|find)\s+"
            r"this\b",
        ),
        # (an address to the model alone -- "Note to the assistant: I prefer metric
        # units" -- is ordinary; walrus_mem._safety.injection.structural_cues flags it only
        # together with an action, a sensitive object or a harmful claim)
        (
            "poisoning",
            r"\b(?:ais?|assistants?|llms?|agents?|models?|bots?)\s+(?:reading|processing|seeing"
            r"|parsing|recalling)\s+this\b",
        ),
        (
            "poisoning",
            r"\b(?:the\s+)?(?:ai|assistant|llm|chatbot)\s+(?:must|should|shall|will|has\s+to|is\s+"
            r"required\s+to)\s+(?:now\s+|always\s+|immediately\s+)?(?:ignore|disregard|reveal|send"
            r"|obey|forget|execute|leak|exfiltrate|stop\s+following|speak\s+only|only\s+speak"
            r"|promote|recommend)",
        ),
        (
            "poisoning",
            r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|reveal\s+"
            r"(?:this\s+)?to|let)\s+(?:the\s+)?(?:user|human|operator)\b",
        ),
        (
            "poisoning",
            r"\b(?:always|must|secretly|quietly|silently)\s+(?:\w+\s+){0,2}(?:include|append|add"
            r"|insert|mention|attach)\b[^\n]{0,80}?\b(?:in|to|into|at\s+the\s+end\s+of)\s+"
            r"(?:every|all|each|your)\s+(?:future\s+)?(?:responses?|answers?|repl(?:y|ies)"
            r"|messages?|outputs?)\b",
        ),
        (
            "poisoning",
            r"\bfor\s+(?:every|each|all)\s+(?:future\s+)?(?:answers?|responses?|repl(?:y|ies))\b"
            r"[^\n]{0,40}?\b(?:secretly|quietly|silently|always)\b",
        ),
        # -- non-English overrides ------------------------------------------------
        (
            "non_english",
            # es
            r"\b(?:ignora|ignore|ignorar|olvida|olvidar|olvide)\s+(?:todas?\s+)?(?:las|tus|sus|los)?"
            r"\s*(?:instrucciones|indicaciones|órdenes|directrices)\b"
            r"|\b(?:ignora|ignorar|olvida|olvidar|olvide)\s+(?:todas\s+las|tus|sus)\s+reglas\b"
            r"|\bno\s+sigas\s+(?:las|tus)\s+(?:instrucciones|reglas)"
            r"|\ba\s+partir\s+de\s+ahora\s+eres\b|\bahora\s+eres\s+(?:un|una|el|la)\b"
            r"|\b(?:revela|muestra)\s+(?:tu|el)\s+(?:prompt|mensaje)\s+(?:del?|de)\s+sistema",
        ),
        (
            "non_english",
            # fr
            r"\b(?:ignore[rz]?|oublie[rz]?)\s+(?:toutes\s+|tous\s+)?(?:les|tes|vos|ces)\s+"
            r"(?:instructions|consignes|règles|directives)\b"
            r"|\bne\s+(?:suis|suivez)\s+(?:pas|plus)\s+(?:les|tes|vos)\s+(?:instructions|consignes"
            r"|règles)|\b(?:tu\s+es|vous\s+êtes)\s+(?:désormais|maintenant)\b"
            r"|\bdésormais,?\s+(?:tu\s+es|vous\s+êtes|tu\s+dois|vous\s+devez)"
            r"|\brévèle[rz]?\s+(?:ton|votre|le)\s+(?:prompt|message)\s+système",
        ),
        (
            "non_english",
            # de
            r"\bignorier(?:e|en|t)?\s+(?:sie\s+)?(?:alle\s+)?(?:vorherigen|bisherigen|obigen|vorigen"
            r"|früheren|deine|ihre|die)?\s*(?:anweisungen|instruktionen|regeln|vorgaben|befehle)"
            r"|\bvergiss\s+(?:alle\s+)?(?:deine|ihre|die|alle)\s+(?:anweisungen|regeln|instruktionen"
            r"|vorgaben)|\bdu\s+bist\s+(?:jetzt|nun|ab\s+sofort)\b|\bab\s+sofort\s+bist\s+du\b"
            r"|\b(?:zeige|verrate|gib)\s+(?:mir\s+)?(?:deinen|den|dein)\s+system-?prompt"
            r"|\bmissachte\b",
        ),
        (
            "non_english",
            # pt
            r"\b(?:ignore|ignora|esqueça|esqueca|desconsidere)\s+(?:todas\s+)?(?:as|suas|tuas)\s+"
            r"(?:instruções|instrucoes|regras|orientações)\b"
            r"|\b(?:agora|a\s+partir\s+de\s+agora),?\s+voc[êe]\s+(?:é|e|será)\b"
            r"|\brevele\s+(?:o|seu)\s+prompt\s+do\s+sistema|\bdesconsidere\b",
        ),
        (
            "non_english",
            # it
            r"\b(?:ignora|dimentica)\s+(?:tutte\s+)?(?:le\s+)?(?:tue\s+)?(?:istruzioni|regole"
            r"|indicazioni)\b|\b(?:d'ora\s+in\s+poi|da\s+ora|ora|adesso)\s+sei\s+(?:un|una|libero"
            r"|libera)\b|\brivela\s+(?:il\s+)?(?:tuo\s+)?prompt\s+di\s+sistema"
            r"|\bnon\s+seguire\s+(?:più\s+)?(?:le\s+)?(?:istruzioni|regole)",
        ),
        (
            "non_english",
            # ru
            r"игнорир\w*\s+(?:все\s+)?(?:предыдущие\s+|прежние\s+|прошлые\s+|системные\s+)?"
            r"(?:инструкци|указани|правил|команд)\w*|забудь\w*\s+(?:все\s+)?(?:свои\s+|предыдущие\s+)?"
            r"(?:инструкци|правил|указани)\w*|\bтеперь\s+ты\b|\bотныне\s+ты\b"
            r"|не\s+следуй\w*|покажи\s+(?:свой\s+)?системн\w*\s+(?:промпт|prompt)",
        ),
        (
            "non_english",
            # zh
            r"(?:忽略|无视|忘记|忘掉|不要理会|不理会|放弃|无视掉)(?:掉)?(?:之前|以前|上面|上述|先前|前面"
            r"|所有|全部|你的)?(?:的)?(?:所有|全部|一切)?(?:的)?(?:指令|指示|说明|规则|提示|命令|设定|要求)"
            r"|你现在是|从现在开始[，,]?你|(?:显示|输出|泄露|告诉我)(?:你的)?系统提示",
        ),
        (
            "non_english",
            # ja
            r"(?:以前|前|上記|これまで|今まで|先ほど)の(?:すべての|全ての)?(?:指示|命令|ルール|指令"
            r"|プロンプト)[はを]?(?:すべて|全て)?(?:無視|忘れ)|(?:指示|命令|ルール)を(?:すべて|全て)?"
            r"(?:無視|忘れ)|あなたは(?:今から|これから)|システムプロンプトを(?:表示|教え|出力|見せ)",
        ),
        (
            "non_english",
            # ko, nl, pl, tr, ar, hi
            r"(?:이전|위의|모든)(?:의)?\s*(?:모든\s*)?(?:지시|명령|규칙|지침)\w*\s*(?:무시|잊어)"
            r"|지금부터\s*너는|시스템\s*프롬프트를?\s*(?:보여|출력|알려)"
            r"|\bnegeer\s+(?:alle\s+)?(?:vorige|eerdere|voorgaande)?\s*(?:instructies|regels)"
            r"|\bzignoruj\s+(?:wszystkie\s+)?(?:poprzednie\s+)?(?:instrukcje|polecenia|zasady)"
            r"|(?:önceki|tüm)\s+(?:talimatları|kuralları)\s+(?:yok\s+say|görmezden\s+gel|unut)"
            r"|تجاهل\s+(?:جميع\s+|كل\s+)?(?:التعليمات|الأوامر)"
            r"|(?:पिछले|सभी)\s+(?:निर्देशों|निर्देश)\s+(?:को\s+)?(?:अनदेखा|नज़रअंदाज़)",
        ),
    )
)
